"""Every component of every stage inherits its stage's protocol, so the trainer may call the optional hooks
(observe, metrics; control's max_stages, the objective's proximal) on any component without getattr."""

import pytest

from workers.pipeline import STAGES
from workers.pipeline.stages import (
    AdvantageStage,
    ControlStage,
    FilterStage,
    GenerateStage,
    ObjectiveStage,
    ReplayStage,
    StageHooks,
)

PROTOCOLS = {
    "generate": GenerateStage,
    "filter": FilterStage,
    "control": ControlStage,
    "replay": ReplayStage,
    "advantage": AdvantageStage,
    "objective": ObjectiveStage,
}

COMPONENTS = [(stage, name) for stage, registry in STAGES.items() for name in registry]


def test_every_stage_has_a_protocol():
    assert set(PROTOCOLS) == set(STAGES)
    assert all(StageHooks in protocol.__mro__ for protocol in PROTOCOLS.values())


@pytest.mark.parametrize(("stage", "name"), COMPONENTS, ids=[f"{stage}:{name}" for stage, name in COMPONENTS])
def test_a_component_inherits_its_stage_protocol_and_hooks(stage, name):
    component = STAGES[stage].get(name)
    protocol = PROTOCOLS[stage]
    # the stage protocols are not runtime-checkable (and some have data members), so issubclass() would raise:
    # the lineage is read off the MRO, which only explicit inheritance puts the protocol in
    assert isinstance(component, type) and protocol in component.__mro__, f"{component} does not inherit {protocol}"
    assert callable(component.observe) and callable(component.metrics)
    if stage == "control":
        assert type(component.max_stages) is int and component.max_stages >= 1
    if stage == "objective":
        assert hasattr(component, "proximal")


def test_the_defaults_do_nothing_and_report_nothing():
    class Bare(ControlStage):
        pass

    class Objective(ObjectiveStage):
        pass

    assert Bare().observe(object()) is None and Bare().metrics() == {} and Bare.max_stages == 1
    assert Objective.proximal is None and Objective().metrics() == {}
