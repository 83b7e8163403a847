"""The algorithm a command uses when ``--algorithm`` is not given (comm/algorithm_default.py)."""

import pytest

from dgtraces.comm.algorithm_default import Basis, default_algorithm


@pytest.mark.parametrize("device,intra,inter,shapes,over,given,algo,basis", [
    ("v100", "nvlink2", "10gbe", [(8, 4)], False, None, "auto", Basis.GPU_DEFAULT),
    ("V100", "nvlink2", "nvlink2", [(8, 8)], False, None, "auto", Basis.GPU_DEFAULT),
    ("v100", "nvlink2", "nvlink2", [(16, 8)], False, None, "ring", Basis.GPU_FALLBACK),
    ("v100", "loopback-gloo", "10gbe", [(2, 2)], False, None, "ring", Basis.GPU_FALLBACK),
    ("v100", "pcie3", "10gbe", [(8, 4)], True, None, "ring", Basis.GPU_FALLBACK),
    ("v100", "pcie3", "10gbe", [(6, 4)], False, None, "ring", Basis.GPU_FALLBACK),
    ("cpu-xeon", "pcie3", "10gbe", [(8, 4)], False, None, "ring", Basis.OTHER_DEFAULT),
    (None, "pcie3", "10gbe", [(8, 4)], False, None, "ring", Basis.OTHER_DEFAULT),
    ("v100", "pcie3", "10gbe", [(8, 4)], False, "tree", "tree", Basis.GIVEN),
])
def test_default_algorithm_rule(device, intra, inter, shapes, over, given, algo, basis):
    c = default_algorithm(device, [intra], [inter], shapes, overridden=over, given=given)
    assert (c.algorithm, c.basis) == (algo, basis)
    assert c.why
