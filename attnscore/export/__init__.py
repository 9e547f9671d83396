"""Exports to course platforms: the Gradescope autograder bundle and the PrairieLearn external
grader (image and question), built from the deployable graders in the top-level ``graders/``."""
