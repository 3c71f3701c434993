"""The support modules of the harness tests (``*_support``: no tests in them) are imported by name from tests in
any folder below this one: pytest's default import mode puts the folder of this conftest, which
has no ``__init__.py``, on ``sys.path`` before it imports a test module below it."""
