"""The old import path of :mod:`relay.guard.embedding`: ``relay.guard_embedding`` is that
module (the same object, so a patch through either name applies to both)."""

import sys

from relay.guard import embedding

sys.modules[__name__] = embedding
