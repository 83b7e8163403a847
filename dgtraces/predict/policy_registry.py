"""The policy registry as the predictor names it: declared once in
:mod:`dgtraces.tables.vocab` (the tables layer, so the schema can read it without loading the
predictor) and re-exported here unchanged."""

from dgtraces.tables.vocab import (
    COLLECTED_POLICIES,
    FRAMEWORK_DEFAULT,
    POLICIES,
    POLICY_NAMES,
    Grouping,
    PolicySpec,
    grouping,
)

__all__ = ["COLLECTED_POLICIES", "FRAMEWORK_DEFAULT", "POLICIES", "POLICY_NAMES", "Grouping",
           "PolicySpec", "grouping"]
