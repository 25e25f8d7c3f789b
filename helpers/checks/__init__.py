"""Detectors for positional-encoding bugs: run them on your own implementation (notebook 10).

Each ``check_*`` function calls the implementation under test on probe inputs, compares what it
returns with ``helpers``' own functions (``rope_cos_sin``, ``apply_rope``, ``alibi_slopes``,
``alibi_bias``, ``sinusoidal_pe``, ``relative_position_bucket``, ``attention``) and returns a
:class:`CheckReport`: one :class:`Finding` per property, each saying whether it held and, where
it did not, the first input where the implementation differs, by how much, and what that usually
means. Nothing is printed; ``print(report)`` shows it, ``report.verdict`` is its one-line summary,
``report.diagnosis`` the first failure's explanation and ``report.raise_if_failed()`` turns a
failure into an exception (for a test suite).

Notation as in the rest of the package: ``d`` head width, ``θ_i`` the speed of pair ``i``
(radians per token), ``m`` and ``n`` the positions of a query and a key, ``H`` heads, ``Tq``
queries, ``Tk`` keys, ``m_h`` ALiBi's slope of head ``h``.

The detectors and the bugs they catch:

- ``check_rope``: layout (which dimensions pair up), a table built for one layout used with the
  other's rotation, speeds (base ignored, a wrong exponent, a scaling of the wrong type), the
  relative property, the norm, and precision at long positions (tables from low-precision angles).
- ``check_alibi``: slopes for every head count, the sign, the decoding step (``Tq = 1``) and the
  alignment of fewer queries than keys.
- ``check_position_ids``: position ids of a left-padded batch.
- ``check_cached_decoding``: decoding with a key/value cache against the full causal pass (a
  forgotten position offset, a causal mask aligned top-left).
- ``check_sinusoidal``: the sinusoidal table (sin/cos order, concatenated halves, the exponent of
  ``div_term``).
- ``check_t5_bias``: T5's relative-position buckets (sign convention, bidirectional flag).
"""

from ._report import CheckFailed, CheckReport, Finding
from .alibi import check_alibi, check_t5_bias
from .positions import check_cached_decoding, check_position_ids
from .rope import check_rope
from .sinusoidal import check_sinusoidal

__all__ = [
    "CheckFailed",
    "CheckReport",
    "Finding",
    "check_alibi",
    "check_cached_decoding",
    "check_position_ids",
    "check_rope",
    "check_sinusoidal",
    "check_t5_bias",
]
