#!/usr/bin/env python3
"""PrairieLearn external grader entry point, installed in the image as /usr/local/bin/attnscore-grade.

Grades /grade/student against /grade/tests/spec.yaml and writes /grade/results/results.json
(see attnscore.export.prairielearn_grader).
"""

import sys

from attnscore.export.prairielearn_grader import main

sys.exit(main(sys.argv[1:]))
