"""nbgrader configuration of the tiny course the grading tests use (tests/hostile/).

The same layout as the real course (../../../nbgrader_config.py): instructor notebooks in
solutions/, student data and the gradebook in .grading/. The tests copy this folder to a
temporary directory first.
"""

import os

c = get_config()  # noqa: F821 (provided by traitlets)

ROOT = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "hostile"
c.CourseDirectory.root = ROOT
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = ".grading/submitted"
c.CourseDirectory.autograded_directory = ".grading/autograded"
c.CourseDirectory.feedback_directory = ".grading/feedback"
os.makedirs(os.path.join(ROOT, ".grading"), exist_ok=True)
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(ROOT, ".grading", "gradebook.db")
c.Execute.timeout = 10
