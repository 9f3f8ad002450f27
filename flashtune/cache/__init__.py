"""The tuned-winner database: SQLite by default, any SQLAlchemy URL via $FLASHTUNE_DB.

``TuneDB`` is the tuner's (raising) access; ``read_runtime_winners`` the dispatcher's (never
raising) read. Stored configs are validated by the op's variant space whenever they are read.
"""

from .db import TuneDB
from .errors import CacheError, CacheWarning
from .keys import DeviceInfo, ProblemKey
from .models import SCHEMA_VERSION
from .records import Trial, Winner
from .runtime import read_runtime_winners

__all__ = ["TuneDB", "CacheError", "CacheWarning", "DeviceInfo", "ProblemKey", "Trial", "Winner",
           "read_runtime_winners", "SCHEMA_VERSION"]
