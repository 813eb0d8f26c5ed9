"""The schedule value object (:class:`logzbench.schedules.ScheduleKind`): one declaration per schedule of
whether it has a length of its own, whether K can double, whether a pilot chooses it, and its aliases."""

import numpy as np
import pytest

from logzbench import schedules
from logzbench.schedules import FILE, kind_of, own_steps

#: name -> (fixed, own steps, doubles, pilot, starts the tuned schedule)
EXPECTED = {
    "linear": (False, None, True, False, True),
    "sigmoid": (False, None, True, False, True),
    "sm14500": (True, 14500, False, False, False),
    "salakhutdinov-murray": (True, 14500, False, False, False),
    "salakhutdinov_murray": (True, 14500, False, False, False),
    "adaptive": (False, None, True, True, False),
    "tuned": (False, None, False, True, False),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_named_schedule_and_alias_declares_its_properties(name):
    kind = kind_of(name)
    assert kind is not FILE and name in kind.names
    assert (kind.fixed, kind.steps, kind.doubles, kind.pilot, kind.starts_tuned) == EXPECTED[name]
    assert own_steps(name) == EXPECTED[name][1]


def test_the_aliases_of_sm14500_are_one_schedule():
    assert schedules.SM14500_NAMES == ("sm14500", "salakhutdinov-murray", "salakhutdinov_murray")
    assert {kind_of(n) for n in schedules.SM14500_NAMES} == {schedules.SM14500}
    ref = schedules.make_schedule("sm14500")
    for n in schedules.SM14500_NAMES:
        np.testing.assert_array_equal(schedules.make_schedule(n), ref)
        assert len(schedules.make_schedule(n, 14500)) == 14501


def test_the_name_lists_follow_from_the_kinds():
    assert schedules.SCHEDULES == ("linear", "sigmoid", "sm14500", "adaptive", "tuned")
    assert schedules.PILOT_SCHEDULES == ("adaptive", "tuned")
    assert schedules.DOUBLING_SCHEDULES == ("linear", "sigmoid", "adaptive")
    assert schedules.TUNED_STARTS == ("linear", "sigmoid")


def test_a_schedule_file_has_its_own_length(tmp_path):
    path = tmp_path / "betas.txt"
    np.savetxt(path, np.linspace(0.0, 1.0, 8))
    kind = kind_of(str(path))
    assert kind is FILE and kind.fixed and not kind.doubles and not kind.pilot and kind.steps is None
    assert own_steps(str(path)) == 7
    with pytest.raises(ValueError, match="has K = 7 steps, but K"):
        schedules.make_schedule(str(path), 5)
    with pytest.raises(ValueError, match="schedule file not found"):
        own_steps(str(tmp_path / "missing.npy"))


def test_anything_else_is_the_file_kind_and_refused_by_make_schedule():
    for name in ("foo", None, 3):
        assert kind_of(name) is FILE
    with pytest.raises(ValueError, match="unknown schedule 'foo'"):
        schedules.make_schedule("foo", 10)


@pytest.mark.parametrize("name", ["adaptive", "tuned"])
def test_a_pilot_schedule_is_not_built_by_name(name):
    with pytest.raises(ValueError, match=f"the {name} schedule is chosen by .*, not by name alone"):
        schedules.make_schedule(name, 10)


@pytest.mark.parametrize("name", schedules.SM14500_NAMES)
def test_the_workflow_knows_every_name_of_sm14500(name):
    """The workflow's K of a fixed schedule (pipeline.sweep.fixed_schedule_K) takes sm14500's aliases too."""
    from logzbench.pipeline.sweep import fixed_schedule_K

    assert fixed_schedule_K({"method": "ais", "schedule": name}) == 14500


def test_the_workflow_fixed_K_of_the_other_schedules(tmp_path):
    from logzbench.pipeline.sweep import fixed_schedule_K

    path = tmp_path / "betas.npy"
    np.save(path, np.linspace(0.0, 1.0, 11))
    assert fixed_schedule_K({"schedule": str(path)}) == 10
    for schedule in (None, "linear", "sigmoid", "adaptive", "tuned", str(tmp_path / "missing.npy"), str(tmp_path)):
        assert fixed_schedule_K({"schedule": schedule} if schedule else {}) is None


def test_the_tuned_schedule_starts_from_a_shape_that_doubles(tmp_path):
    path = tmp_path / "betas.txt"
    np.savetxt(path, np.linspace(0.0, 1.0, 5))
    for start in schedules.TUNED_STARTS:
        schedules.check_tuned_start(start)
    for start, why in [
        ("adaptive", "not a starting shape"),
        ("tuned", "not a starting shape"),
        ("salakhutdinov-murray", "length of its own"),
        (str(path), "length of its own"),
        ("cubic", "not a schedule"),
        (None, "not a schedule"),
    ]:
        with pytest.raises(ValueError, match=f"tuned_start \\(--tuned-start\\) .*first round is one of .*; .*{why}"):
            schedules.check_tuned_start(start)
