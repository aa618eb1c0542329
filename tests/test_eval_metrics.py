"""Metric tests against hand-worked trajectories: SR, IS, GCS (the paper's sub-goals and ALFWorld's conditions), LC,
RDI, PR, the RDI rule pattern by pattern with its near misses, and sub-goals / goal conditions counted from world
states (with the heated-potato partial credit of the paper's example)."""

from __future__ import annotations

import pytest

from tasks.muep.eval.goals import GoalCounter, GoalTracker
from tasks.muep.eval.metrics import Tally, disoriented, episode_metrics, report, tally
from tasks.muep.eval.env import convert_command
from tasks.muep.eval.protocol import released_repeat
from tasks.muep.eval.records import EpisodeResult, StepRecord
from tasks.muep.pddl import Instance, Problem, Receptacle
from tasks.muep.world_state import WorldState

NH = "Nothing happens."
TOTALS = {"pick_and_place_simple": (2, 1), "pick_heat_then_place_in_recep": (3, 3), "pick_two_obj_and_place": (4, 2),
          "look_at_obj_in_light": (3, 2)}   # (sub-goals, ALFWorld conditions)


def episode(eid: str, split: str, task_type: str, steps: list[tuple[str, str, bool, int, int]],
            success: bool = False) -> EpisodeResult:
    """``steps``: (action, feedback, valid, sub-goals done, ALFWorld conditions met) after each action."""
    records = tuple(StepRecord(step=i, action=a, observation=o, valid=v, won=success and i == len(steps),
                               goals_met=g, conditions_met=c) for i, (a, o, v, g, c) in enumerate(steps, 1))
    goals, conditions = TOTALS[task_type]
    return EpisodeResult(agent="test", episode_id=eid, split=split, scene="FloorPlan1", task_type=task_type,
                         instruction="", initial_observation="You are in the middle of a room.", goals_total=goals,
                         initial_goals_met=0, success=success, end_reason="won" if success else "max_steps",
                         agent_calls=0, steps=records, conditions_total=conditions, initial_conditions_met=0)


# A: pick & place, solved in 4 valid actions: found at the take (1 of 2 sub-goals), placed at the move (2 of 2).
A = episode("A", "seen_test", "pick_and_place_simple", [
    ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1.", True, 0, 0),
    ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1.", True, 1, 0),
    ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is open.", True, 1, 0),
    ("move apple 1 to fridge 1", "You move the apple 1 to the fridge 1.", True, 2, 1)], success=True)
# B: heat & place, fails: "heat potato 1" (no appliance named) three times, "Nothing happens." each time -- the third
# repeats the second, action and feedback: A A -- then places the unheated potato: found and placed, 2 of 3 sub-goals
# (the paper's example), 1 of ALFWorld's 3 conditions.
B = episode("B", "seen_test", "pick_heat_then_place_in_recep", [
    ("go to garbagecan 1", "You arrive at garbagecan 1. On the garbagecan 1, you see a potato 1.", True, 0, 0),
    ("take potato 1 from garbagecan 1", "You pick up the potato 1 from the garbagecan 1.", True, 1, 0),
    ("heat potato 1", NH, False, 1, 0),
    ("heat potato 1", NH, False, 1, 0),
    ("heat potato 1", NH, False, 1, 0),
    ("go to diningtable 1", "You arrive at diningtable 1. On the diningtable 1, you see nothing.", True, 1, 0),
    ("move potato 1 to diningtable 1", "You move the potato 1 to the diningtable 1.", True, 2, 1)])
# C: pick two, fails: places one key chain (found 1 + placed 1), takes it back (placed 0), then goes back and forth
# armchair <-> sofa with the same descriptions each time: A B A B, flagged at the 8th action.
ARM, SOFA = ("You arrive at armchair 1. On the armchair 1, you see nothing.",
             "You arrive at sofa 1. On the sofa 1, you see nothing.")
C = episode("C", "unseen_test", "pick_two_obj_and_place", [
    ("take keychain 1 from armchair 1", "You pick up the keychain 1 from the armchair 1.", True, 1, 0),
    ("go to sofa 1", SOFA, True, 1, 0),
    ("move keychain 1 to sofa 1", "You move the keychain 1 to the sofa 1.", True, 2, 1),
    ("take keychain 1 from sofa 1", "You pick up the keychain 1 from the sofa 1.", True, 1, 0),
    ("go to armchair 1", ARM, True, 1, 0),
    ("go to sofa 1", SOFA, True, 1, 0),
    ("go to armchair 1", ARM, True, 1, 0),
    ("go to sofa 1", SOFA, True, 1, 0),
    ("go to armchair 1", ARM, True, 1, 0)])
# D: look, fails without disorientation: the second "use desklamp 1" got other feedback than the first. The lamp is
# on (1 of 3 sub-goals: the book was never found), and lit where the agent is (1 of ALFWorld's 2 conditions).
D = episode("D", "unseen_test", "look_at_obj_in_light", [
    ("go to desk 1", "You arrive at desk 1. On the desk 1, you see a desklamp 1.", True, 0, 0),
    ("use desklamp 1", "You turn on the desklamp 1.", True, 1, 1),
    ("use desklamp 1", NH, False, 1, 1),
    ("examine desk 1", "On the desk 1, you see a desklamp 1.", True, 1, 1)])


def test_per_episode_metrics_of_the_hand_worked_trajectories():
    a, b, c, d = (episode_metrics(e) for e in (A, B, C, D))
    assert (a.success, a.steps, a.valid, a.goals_met, a.conditions_met, a.progress, a.disoriented) == \
        (True, 4, 4, 2, 1, 1.0, False)
    assert (b.success, b.steps, b.valid, b.goals_met, b.goals_total, b.conditions_met, b.conditions_total,
            b.disoriented) == (False, 7, 4, 2, 3, 1, 3, True)
    assert b.progress == pytest.approx(1 / 3)
    assert (c.steps, c.valid, c.goals_met, c.conditions_met, c.progress, c.disoriented) == (9, 9, 1, 0, 0.5, True)
    assert (d.steps, d.valid, d.goals_met, d.conditions_met, d.progress, d.disoriented) == (4, 3, 1, 1, 0.5, False)


def test_aggregate_rates_of_the_hand_worked_trajectories():
    rates = tally([A, B, C, D]).rates()
    assert rates["sr"] == 1 / 4
    assert rates["is_success"] == 4.0                        # only A succeeded, in 4 steps
    assert rates["is_all"] == (4 + 7 + 9 + 4) / 4 == 6.0
    assert rates["gcs"] == (2 + 2 + 1 + 1) / (2 + 3 + 4 + 3) == 0.5         # the paper's sub-goals, summed
    assert rates["gcs_alfworld"] == (1 + 1 + 0 + 1) / (1 + 3 + 2 + 2) == 0.375   # ALFWorld's conditions, summed
    assert rates["lc"] == pytest.approx((4 + 4 + 9 + 3) / 24)
    assert rates["rdi"] == pytest.approx(2 / 3)              # B and C of the three failures
    assert rates["pr"] == pytest.approx((1 + 1 / 3 + 1 / 2 + 1 / 2) / 4)


def test_undefined_rates_are_none_and_splits_add_up_to_overall():
    only_success = tally([A]).rates()
    assert only_success["rdi"] is None and only_success["sr"] == 1.0
    assert tally([B]).rates()["is_success"] is None
    assert Tally().rates()["lc"] is None and Tally().rates()["gcs_alfworld"] is None
    body = report([A, B, C, D])
    assert body["by_split"]["seen_test"]["episodes"] == 2 and body["by_split"]["unseen_test"]["sr"] == 0.0
    assert body["overall"]["gcs"] == 0.5 and body["overall"]["gcs_alfworld"] == 0.375
    assert body["overall"]["rdi"] == pytest.approx(0.6667)
    assert set(body["by_task_type"]) == {"pick_and_place_simple", "pick_heat_then_place_in_recep",
                                         "pick_two_obj_and_place", "look_at_obj_in_light"}
    assert body["by_split_task_type"]["unseen_test"]["look_at_obj_in_light"]["gcs"] == pytest.approx(0.3333)
    assert set(body["by_split_task_type"]["seen_test"]) == {"pick_and_place_simple", "pick_heat_then_place_in_recep"}
    assert tally([A, B]) + tally([C, D]) == tally([A, B, C, D])
    assert Tally.from_counts(tally([A, C]).counts()) == tally([A, C])


def test_a_successful_episode_never_counts_for_rdi_even_when_it_repeats():
    repeat = episode("E", "seen_test", "pick_and_place_simple", [
        ("look", "You see a fridge 1.", True, 0, 0), ("look", "You see a fridge 1.", True, 0, 0),
        ("take apple 1 from fridge 1", "You pick up the apple 1.", True, 1, 0),
        ("move apple 1 to fridge 1", "You move it.", True, 2, 1)], success=True)
    assert episode_metrics(repeat).disoriented
    assert tally([repeat, B]).rates()["rdi"] == 1.0          # 1 disoriented of 1 failed (B)
    assert tally([repeat, D]).rates()["rdi"] == 0.0


FRIDGE = "You arrive at fridge 1. The fridge 1 is closed."
OPENED = "You open the fridge 1. The fridge 1 is open. In it, you see a apple 1."
CLOSED = "You close the fridge 1."


@pytest.mark.parametrize(("observations", "actions", "expected"), [
    (["o0"], [], False),
    # A A: "go to fridge 1" three times; the third repeats the second, action and feedback
    (["o0", FRIDGE, NH, NH], ["go to fridge 1"] * 3, True),
    # near miss: twice only -- the second got other feedback than the first
    (["o0", FRIDGE, NH], ["go to fridge 1"] * 2, False),
    # A A as soon as an action is said again with the same feedback
    (["o0", NH, NH], ["take apple 1", "take apple 1"], True),
    # near miss: the same feedback after different actions is exploring, not a loop
    (["o0", NH, NH, NH], ["a", "b", "c"], False),
    # near miss: the same action again, with other feedback ("look" after something moved)
    (["o0", "You see A.", "You see B."], ["look", "look"], False),
    # A B A B: open / close / open / close the same fridge, the same feedback each time: flagged at the 4th action
    (["o0", OPENED, CLOSED, OPENED, CLOSED], ["open fridge 1", "close fridge 1"] * 2, True),
    # near miss: A B A (one cycle is no repetition)
    (["o0", OPENED, CLOSED, OPENED], ["open fridge 1", "close fridge 1", "open fridge 1"], False),
    # near miss: A B A B whose feedback keeps changing (an object moved in between)
    (["o0", "A1", "B1", "A2", "B2"], ["a", "b", "a", "b"], False),
    # near miss: A B A C and A B C A
    (["o0", "F", "G", "F", "H"], ["a", "b", "a", "c"], False),
    (["o0", "F", "G", "H", "F"], ["a", "b", "c", "a"], False),
    # near miss: A B B A with the B's answered differently
    (["o0", "F", "G", "H", "F"], ["a", "b", "b", "a"], False),
    # one action said again and again while its feedback alternates: actions and feedback both cycle
    (["o0", "on", "off", "on", "off"], ["use lamp 1"] * 4, True),
    # the pattern may start anywhere, after other steps
    (["o0", "x", "y", "F", "G", "F", "G"], ["p", "q", "a", "b", "a", "b"], True),
])
def test_rdi_rule(observations, actions, expected):
    assert disoriented(observations, actions) is expected


def test_rdi_rule_checks_its_input():
    with pytest.raises(ValueError, match="one more observation"):
        disoriented(["o0"], ["a"])


# ----------------------------------------------------------------------------------------------------------------
# Goal conditions from world states


def _counter(task_type: str, obj: str, target: str, receptacles, instances) -> GoalCounter:
    return GoalCounter.for_problem(Problem("t", receptacles, instances, task_type, obj, target))


KITCHEN = [Receptacle("countertop 1", "CounterTop", "loc_1", False), Receptacle("microwave 1", "Microwave", "loc_2", True),
           Receptacle("diningtable 1", "DiningTable", "loc_3", False)]
POTATOES = [Instance("potato 1", "Potato", "countertop 1"), Instance("potato 2", "Potato", "countertop 1")]


def _state(**kw) -> WorldState:
    base = {"placements": {"potato 1": "countertop 1", "potato 2": "countertop 1"}}
    return WorldState(agent_at=kw.pop("agent_at", None), holding=kw.pop("holding", None), **(base | kw))


def test_heat_and_place_partial_credit_the_papers_way_and_alfworlds():
    """"Put a heated potato on the table". The paper's sub-goals: found (held), heated, placed. ALFWorld's
    conditions: in place, heated, the *same* potato heated and in place.

    * an unheated potato put on the table: found + placed = 2/3 (the paper's own example); ALFWorld 1/3;
    * one potato heated, the other placed: 3/3 sub-goals (the paper's count cannot tell), ALFWorld 2/3;
    * the heated potato placed: 3/3 both ways."""
    goals = _counter("pick_heat_then_place_in_recep", "Potato", "DiningTable", KITCHEN, POTATOES)
    assert (goals.subgoals_total, goals.conditions_total) == (3, 3)
    assert (goals.subgoals(_state(), set()), goals.conditions(_state())) == (0, 0)
    unheated_on_table = _state(placements={"potato 1": "diningtable 1", "potato 2": "countertop 1"})
    assert goals.subgoals(unheated_on_table, {"potato 1"}) == 2 and goals.conditions(unheated_on_table) == 1
    held_and_heated = _state(holding="potato 1", hot={"potato 1"}, placements={"potato 2": "countertop 1"})
    assert goals.subgoals(held_and_heated, {"potato 1"}) == 2 and goals.conditions(held_and_heated) == 1
    other_placed = _state(hot={"potato 1"}, placements={"potato 1": "countertop 1", "potato 2": "diningtable 1"})
    assert goals.subgoals(other_placed, {"potato 1", "potato 2"}) == 3 and goals.conditions(other_placed) == 2
    done = _state(hot={"potato 1"}, placements={"potato 1": "diningtable 1", "potato 2": "countertop 1"})
    assert goals.subgoals(done, {"potato 1"}) == 3 and goals.conditions(done) == 3
    # the other state marks do not count for a heat task
    cooled = _state(cool={"potato 1"}, placements={"potato 1": "diningtable 1"})
    assert goals.subgoals(cooled, {"potato 1"}) == 2 and goals.conditions(cooled) == 1


def test_found_is_remembered_over_the_episode_by_the_tracker():
    goals = _counter("pick_heat_then_place_in_recep", "Potato", "DiningTable", KITCHEN, POTATOES)
    tracker = GoalTracker(goals)
    assert tracker.update(_state()) == (0, 0)
    assert tracker.update(_state(agent_at="countertop 1")) == (0, 0)           # seen is not found
    assert tracker.update(_state(holding="potato 2", placements={"potato 1": "countertop 1"})) == (1, 0)
    assert tracker.update(_state(placements={"potato 2": "diningtable 1", "potato 1": "countertop 1"})) == (2, 1)
    assert tracker.update(_state()) == (1, 0)                                  # taken away again: found stays
    assert tracker.held == {"potato 2"}


def test_pick_two_counts_objects_found_and_placed_in_one_receptacle():
    recs = [Receptacle("countertop 1", "CounterTop", "loc_1", False),
            Receptacle("countertop 2", "CounterTop", "loc_2", False), Receptacle("fridge 1", "Fridge", "loc_3", True)]
    apples = [Instance(f"apple {i}", "Apple", "fridge 1") for i in (1, 2, 3)]
    goals = _counter("pick_two_obj_and_place", "Apple", "CounterTop", recs, apples)
    state = lambda places: WorldState(agent_at=None, holding=None, placements=places)  # noqa: E731
    assert (goals.subgoals_total, goals.conditions_total) == (4, 2)
    start = state({"apple 1": "fridge 1", "apple 2": "fridge 1"})
    assert (goals.subgoals(start, set()), goals.conditions(start)) == (0, 0)
    half_done = state({"apple 1": "countertop 1", "apple 2": "fridge 1"})    # one in place from the start
    assert (goals.subgoals(half_done, set()), goals.conditions(half_done)) == (2, 1)
    both = state({"apple 1": "countertop 1", "apple 2": "countertop 1"})
    assert goals.subgoals(both, {"apple 2"}) == 4                             # the other one found and placed
    one = state({"apple 1": "countertop 1", "apple 2": "fridge 1"})
    assert (goals.subgoals(one, {"apple 1"}), goals.conditions(one)) == (2, 1)
    apart = state({"apple 1": "countertop 1", "apple 2": "countertop 2"})        # not the same receptacle
    assert (goals.subgoals(apart, {"apple 1", "apple 2"}), goals.conditions(apart)) == (3, 1)
    three = state({"apple 1": "countertop 1", "apple 2": "countertop 1", "apple 3": "countertop 1"})
    assert (goals.subgoals(three, {"apple 1", "apple 2", "apple 3"}), goals.conditions(three)) == (4, 2)  # capped


def test_look_needs_the_object_found_the_lamp_on_and_the_object_in_hand_where_the_lamp_is():
    recs = [Receptacle("desk 1", "Desk", "loc_1", False), Receptacle("sidetable 1", "SideTable", "loc_1", False),
            Receptacle("bed 1", "Bed", "loc_2", False)]
    insts = [Instance("desklamp 1", "DeskLamp", "sidetable 1"), Instance("book 1", "Book", "bed 1")]
    goals = _counter("look_at_obj_in_light", "Book", "DeskLamp", recs, insts)
    lamp = {"desklamp 1": "sidetable 1"}
    assert (goals.subgoals_total, goals.conditions_total) == (3, 2)
    holding_in_dark = WorldState(agent_at="bed 1", holding="book 1", placements=lamp)
    assert (goals.subgoals(holding_in_dark, {"book 1"}), goals.conditions(holding_in_dark)) == (1, 1)
    lamp_on_elsewhere = WorldState(agent_at="bed 1", holding="book 1", placements=lamp, toggled={"desklamp 1"})
    assert (goals.subgoals(lamp_on_elsewhere, {"book 1"}), goals.conditions(lamp_on_elsewhere)) == (2, 1)
    # desk 1 shares the lamp's location: the lamp is in view
    lit_empty_handed = WorldState(agent_at="desk 1", holding=None, placements=lamp | {"book 1": "bed 1"},
                                  toggled={"desklamp 1"})
    assert (goals.subgoals(lit_empty_handed, set()), goals.conditions(lit_empty_handed)) == (1, 1)
    done = WorldState(agent_at="desk 1", holding="book 1", placements=lamp, toggled={"desklamp 1"})
    assert (goals.subgoals(done, {"book 1"}), goals.conditions(done)) == (3, 2)


def test_a_second_receptacle_counts_like_the_first():
    """ALFWorld's games put some objects in two receptacles (a mug in the coffee machine and on the countertop);
    the state keeps the first by name in ``placements`` and the others in ``also_in``. The game's goal
    (``inReceptacle ?o ?r``) holds for any of them, so the counts must too -- else the oracle wins a game whose
    conditions read unmet."""
    recs = [Receptacle("coffeemachine 1", "CoffeeMachine", "loc_1", False),
            Receptacle("countertop 1", "CounterTop", "loc_1", False), Receptacle("cabinet 1", "Cabinet", "loc_2", True),
            Receptacle("sidetable 1", "SideTable", "loc_3", False), Receptacle("desk 1", "Desk", "loc_4", False)]
    mugs = [Instance("mug 1", "Mug", "coffeemachine 1", also_in=("countertop 1",)), Instance("mug 2", "Mug", "cabinet 1")]
    simple = _counter("pick_and_place_simple", "Mug", "CounterTop", recs, mugs)
    start = WorldState(agent_at=None, holding=None, placements={"mug 1": "coffeemachine 1", "mug 2": "cabinet 1"},
                       also_in={"mug 1": ["countertop 1"]})
    assert simple.conditions(start) == 1 and simple.subgoals(start, set()) == 1
    two = _counter("pick_two_obj_and_place", "Mug", "CounterTop", recs, mugs)
    both = WorldState(agent_at=None, holding=None, placements={"mug 1": "coffeemachine 1", "mug 2": "countertop 1"},
                      also_in={"mug 1": ["countertop 1"]})
    assert (two.subgoals(both, {"mug 2"}), two.conditions(both)) == (4, 2)
    lamp = [Instance("desklamp 1", "DeskLamp", "sidetable 1", also_in=("desk 1",)), Instance("mug 3", "Mug", "desk 1")]
    look = _counter("look_at_obj_in_light", "Mug", "DeskLamp", recs, lamp)
    at_desk = WorldState(agent_at="desk 1", holding="mug 3", placements={"desklamp 1": "desk 1"},
                         also_in={"desklamp 1": ["sidetable 1"]}, toggled={"desklamp 1"})
    at_side = WorldState(agent_at="sidetable 1", holding="mug 3", placements={"desklamp 1": "desk 1"},
                         also_in={"desklamp 1": ["sidetable 1"]}, toggled={"desklamp 1"})
    assert look.conditions(at_desk) == look.conditions(at_side) == 2


def test_pick_and_place_is_found_and_placed():
    goals = _counter("pick_and_place_simple", "Potato", "DiningTable", KITCHEN, POTATOES)
    assert (goals.subgoals_total, goals.conditions_total) == (2, 1)
    assert (goals.subgoals(_state(), set()), goals.conditions(_state())) == (0, 0)
    placed = _state(placements={"potato 2": "diningtable 1"})
    assert (goals.subgoals(placed, {"potato 2"}), goals.conditions(placed)) == (2, 1)


# ---------------------------------------------------------------------------------------------------------------------
# The released protocol (tasks.muep.eval.protocol): its repeat rule and how RDI counts under it


@pytest.mark.parametrize(("previous", "action", "expected"), [
    ([], "look", None),                                            # the first action is never a repeat
    (["look"], "look", "A-A"),
    (["go to desk 1", "look"], "look", "A-A"),
    (["look", "inventory", "look"], "inventory", "A-B-A-B"),
    (["look", "inventory", "look"], "examine desk 1", None),         # A-B-A-C
    (["look", "inventory"], "look", None),                         # A-B-A: not yet
    (["a", "b", "c", "look", "inventory", "look"], "inventory", "A-B-A-B"),  # only the last four are remembered
    (["go to desk 1", "Go to desk 1"], "go to desk 1", None),      # exact strings, as the client compares them
])
def test_released_repeat_rule(previous, action, expected):
    assert released_repeat(previous, action) == expected


def test_rdi_under_the_released_protocol_is_the_repeat_stop():
    stopped = episode("S", "seen_test", "pick_and_place_simple", [("look", "You are in a room.", True, 0, 0)])
    stopped = EpisodeResult(**(stopped.__dict__ | {"protocol": "muep-released", "end_reason": "loop",
                                                   "stopped_action": "look"}))
    assert episode_metrics(stopped).disoriented
    # the same trajectory under ALFWorld's protocol: one action, no pattern
    plain = EpisodeResult(**(stopped.__dict__ | {"protocol": "alfworld", "end_reason": "max_steps",
                                                 "stopped_action": None}))
    assert not episode_metrics(plain).disoriented
    # a released-protocol episode that ran out of steps with the same feedback repeated is not (the stop came first
    # in a real run; the record says it did not fire)
    ran_out = EpisodeResult(**(B.__dict__ | {"protocol": "muep-released"}))
    assert not episode_metrics(ran_out).disoriented and episode_metrics(B).disoriented
    assert EpisodeResult.from_json(stopped.to_json()) == stopped


def test_put_commands_are_respelled_between_grammars_and_others_kept():
    assert convert_command("move apple 1 to fridge 1", "muep-released") == "put apple 1 in/on fridge 1"
    assert convert_command("put apple 1 in/on fridge 1", "alfworld-0.4") == "move apple 1 to fridge 1"
    assert convert_command("put apple 1 in/on fridge 1", "muep") == "put apple 1 in/on fridge 1"
    for kept in ("go to fridge 1", "put bowl 1 into box 1", "take apple 1 from fridge 1"):
        assert convert_command(kept, "muep-released") == kept
    with pytest.raises(ValueError, match="unknown grammar"):
        convert_command("move a 1 to b 1", "klingon")
