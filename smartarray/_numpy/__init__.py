"""The numpy face of SmartArray: NEP 13/18 protocols, host fast paths, views, construction.

Built on the class (:mod:`smartarray._array`) and registered with it when imported: the
operator and ndarray members are installed on the class, and the class's hooks
(:mod:`smartarray._hooks`) are filled.
"""

from .._array import SmartArray
from . import (
    construct,  # noqa: F401  (registers SmartArray's constructor paths)
    creation,  # noqa: F401  (registers numpy's *_like functions)
    fastpath,
    flatiter,  # noqa: F401  (registers a.flat)
    pickling,  # noqa: F401  (registers __reduce__)
    protocols,
    shuffle,  # noqa: F401  (registers the shuffle reads)
    view_functions,  # noqa: F401  (registers numpy's view functions)
)

# The ndarray members forwarded to the host copy, then the fast operators (idempotent: plain
# assignments, made once when this package is first imported).
for _name, _member in protocols.ndarray_members(SmartArray).items():
    setattr(SmartArray, _name, _member)
fastpath.install(SmartArray)
