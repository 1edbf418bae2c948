"""How nbval checks the course's notebooks, when ``pytest --nbval`` runs them with the tests (``make test``).

* **Figures are compared.** nbval leaves ``image/png`` out of its comparison
  unless it runs with nbdime. The solution notebooks' figures are stored as the
  same bytes on every build (roofkit/course/outputs.py), so a change that moves
  a figure's pixels, a catalog figure drawn into a roofline say, must fail like a
  changed number. Cells marked ``# NBVAL_IGNORE_OUTPUT`` or tagged
  ``nbval-ignore-output`` (measurements of the machine) stay uncompared.
* **Student notebooks run, and are not compared.** ``notebooks/`` holds the
  student copies, stored without outputs: each must run top to bottom without
  an error, as ``--nbval-lax`` checks, in the same pytest run as the solutions
  (``--nbval``), so one session runs every notebook once and the two workers
  stay busy.
"""

from pathlib import Path

COMPARED_FIGURES = ("image/png",)
STUDENT_COPIES = Path(__file__).resolve().parent / "notebooks"


def pytest_collection_modifyitems(items):
    for item in items:
        notebook = item.parent
        if not type(notebook).__module__.startswith("nbval"):
            continue
        notebook.skip_compare = tuple(key for key in notebook.skip_compare if key not in COMPARED_FIGURES)
        if STUDENT_COPIES in Path(str(notebook.path)).resolve().parents:
            item.options["check"] = False  # run it, as --nbval-lax does: a student copy stores no outputs
