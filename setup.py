"""Build of smartarray's optional C module (everything else is in pyproject.toml).

``smartarray._speedups`` gives SmartArray its indexing fast paths as C slots. It is optional:
where no C compiler is found the package installs without it, and SmartArray runs the same
paths in Python (smartarray/_array.py), slower.
"""

import sysconfig

from setuptools import Extension, setup

# Free-threaded CPython (3.13t): the module relies on the GIL; the Python paths are used.
_FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

setup(
    ext_modules=[]
    if _FREE_THREADED
    else [Extension("smartarray._speedups", ["smartarray/_speedups.c"], optional=True)],
)
