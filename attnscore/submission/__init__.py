"""What a student handed in: finding submissions (files, folders, zips, notebooks) and reading them."""
