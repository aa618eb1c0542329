"""The perception pipeline's pieces without a simulator: camera geometry, the paper's cross-view box matching on a
synthetic scene with known correspondences (a missed view, a label disagreement), occupancy merging, the point-cloud
grasp sampler, the detector backend on a tiny randomly initialised OWL-ViT, ROS message round trips, and the clear
errors of bad settings."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot.contract.params import (
    CameraParams,
    CameraRigParams,
    FusionParams,
    GroundingParams,
    PipelineParams,
)
from robot.errors import BackendUnavailable, GoalError
from robot.grasps import Hand, matrix_from_quat
from robot.perception import cameras, point_grasps
from robot.perception.cameras import (
    CameraFrame,
    CameraSpec,
    backproject,
    intrinsics,
    look_at,
    project,
)
from robot.perception.fusion import in_boxes
from robot.perception.grasp_backends import create_grasp_backend
from robot.perception.grounding import Detection, assign_names, create_grounder, phrase
from robot.perception.matching import iou, match_boxes, match_views, vote
from robot.perception.scene import merge_voxels, unique_cells

# ------------------------------------------------------------------------------------------------ cameras


def _ring(k: int = 3, radius: float = 1.2, height: float = 0.8, size=(160, 120)) -> list[CameraSpec]:
    K = intrinsics(*size, 60.0)
    out = []
    for i in range(k):
        a = 2 * np.pi * i / k
        T = look_at((radius * np.cos(a), radius * np.sin(a), height), (0.0, 0.0, 0.0))
        out.append(CameraSpec(f"c{i}", size[0], size[1], K, T))
    return out


def test_look_at_gives_a_right_handed_optical_frame_that_sees_its_target():
    T = look_at((1.0, 0.5, 0.8), (0.0, 0.0, 0.0))
    R = T[:3, :3]
    assert np.allclose(R.T @ R, np.eye(3)) and np.isclose(np.linalg.det(R), 1.0)
    spec = CameraSpec("c", 160, 120, intrinsics(160, 120, 60.0), T)
    uv, z = project(np.array([[0.0, 0.0, 0.0]]), spec)
    assert np.allclose(uv[0], [80.0, 60.0]) and z[0] > 0  # the target is at the image centre, in front
    uv_up, _ = project(np.array([[0.0, 0.0, 0.2]]), spec)
    assert uv_up[0, 1] < 60.0  # world up is image up (rows grow downwards)
    with pytest.raises(ValueError):
        look_at((1.0, 1.0, 1.0), (1.0, 1.0, 1.0))


def test_backprojection_inverts_projection():
    spec = _ring(1)[0]
    depth = np.full((spec.height, spec.width), 1.5, dtype=np.float32)
    depth[:10] = 0.0  # no reading there
    frame = CameraFrame(spec, np.zeros((spec.height, spec.width, 3), np.uint8), depth)
    points = backproject(frame, stride=7)
    uv, z = project(points, spec)
    assert np.allclose(z, 1.5, atol=1e-6)
    assert (uv[:, 1] >= 10).all()  # nothing from the rows without depth
    steps = (uv - 0.5) / 7
    assert np.allclose(steps, np.round(steps), atol=1e-6)  # pixel centres of the sampled pixels


def test_frames_must_match_their_calibration():
    spec = _ring(1)[0]
    with pytest.raises(ValueError, match="do not match"):
        CameraFrame(spec, np.zeros((10, 10, 3), np.uint8), np.zeros((10, 10), np.float32))


def test_the_rig_puts_cameras_above_the_table_top():
    specs = cameras.rig(CameraRigParams(), table_height=0.75)
    assert len(specs) == 3
    assert all(s.eye[2] > 0.75 + 0.5 for s in specs)
    assert all(s.forward[2] < 0 for s in specs)  # every camera looks down at the table


# ------------------------------------------------------------------------------------------------ matching


def _cube(centre, half: float, n: int = 9) -> np.ndarray:
    """Points on the surface of an axis-aligned cube."""
    g = np.linspace(-half, half, n)
    faces = []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            a, b = np.meshgrid(g, g)
            face = np.zeros((a.size, 3))
            others = [i for i in range(3) if i != axis]
            face[:, axis] = sign * half
            face[:, others[0]], face[:, others[1]] = a.ravel(), b.ravel()
            faces.append(face)
    return np.unique(np.concatenate(faces), axis=0) + np.asarray(centre)


def _box_of(points: np.ndarray, spec: CameraSpec) -> tuple[float, float, float, float]:
    uv, _ = project(points, spec)
    return float(uv[:, 0].min()), float(uv[:, 1].min()), float(uv[:, 0].max() + 1e-6), float(uv[:, 1].max() + 1e-6)


def test_matching_recovers_known_correspondences_with_a_missed_view_and_a_label_disagreement():
    specs = _ring(3)
    objects = {"apple": _cube((0.25, 0.0, 0.05), 0.04), "bowl": _cube((-0.2, 0.2, 0.05), 0.06),
               "can": _cube((-0.1, -0.3, 0.05), 0.03)}
    points = np.concatenate(list(objects.values()))
    # each view lists its boxes in its own order; view 2 misses the can; view 1 calls the apple a "can"
    detections = []
    for view, spec in enumerate(specs):
        names = ["can", "apple", "bowl"] if view == 0 else ["bowl", "apple", "can"]
        dets = []
        for name in names:
            if view == 2 and name == "can":
                continue
            label = "can" if (view == 1 and name == "apple") else name
            dets.append(Detection(label, 1.0, _box_of(objects[name], spec)))
        detections.append(dets)
    matches, vectors = match_views(points, specs, detections)
    assert len(vectors) == 3 and [len(v) for v in vectors] == [3, 3, 2]
    groups = {m.label: m.boxes for m in matches}
    assert groups == {"apple": (1, 1, 1), "bowl": (2, 0, 0), "can": (0, 2, -1)}
    by_label = {m.label: m for m in matches}
    assert by_label["apple"].votes == 2 and by_label["can"].views == 2  # majority beat the wrong label
    for view in range(3):  # each box used at most once
        used = [m.boxes[view] for m in matches if m.boxes[view] >= 0]
        assert len(used) == len(set(used)) == len(detections[view])


def test_greedy_assignment_takes_the_best_pair_and_never_gives_a_view_two_boxes():
    a = np.array([1, 1, 1, 1, 0, 0, 0, 0], bool)
    b = np.array([0, 0, 0, 0, 1, 1, 1, 1], bool)
    a2 = np.array([1, 1, 1, 0, 0, 0, 0, 0], bool)  # best match for a
    ab = np.array([0, 0, 1, 1, 1, 1, 0, 0], bool)  # half of a, half of b
    groups = match_boxes([[a, b], [a2, ab]], min_iou=0.0)
    assert (0, 0) in groups  # a with a2 (IoU 0.75)
    assert (1, 1) in groups  # b with the half-and-half box: a is taken by a2 in that view
    assert len(groups) == 2
    assert match_boxes([[a], [b]], min_iou=0.0) == [(-1, 0), (0, -1)]  # disjoint: no match
    assert iou(a, a2) == 0.75 and iou(a, b) == 0.0 and iou(np.zeros(3, bool), np.zeros(3, bool)) == 0.0


def test_label_vote_breaks_ties_by_score_then_name():
    dets = [[Detection("cup", 0.9, (0, 0, 1, 1))], [Detection("mug", 0.4, (0, 0, 1, 1))]]
    assert vote((0, 0), dets) == ("cup", 1)
    dets = [[Detection("cup", 0.5, (0, 0, 1, 1))], [Detection("bowl", 0.5, (0, 0, 1, 1))]]
    assert vote((0, 0), dets) == ("bowl", 1)


# ------------------------------------------------------------------------------------------------ occupancy


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(-3, 3), st.integers(0, 4)), min_size=1, max_size=60,
                unique=True))
def test_merged_voxel_boxes_cover_exactly_the_occupied_voxels(cells):
    cells = np.array(cells)
    boxes = merge_voxels(cells)
    covered = [(i, j, k) for b in boxes for i in range(b[0], b[3]) for j in range(b[1], b[4])
               for k in range(b[2], b[5])]
    assert len(covered) == len(set(covered))  # no voxel twice
    assert set(covered) == {tuple(c) for c in cells.tolist()}
    assert len(boxes) <= len(cells)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(-40, 40), st.integers(-3, 300), st.integers(-9, 4)), max_size=80))
def test_unique_cells_equals_numpys_row_unique(cells):
    cells = np.array(cells, dtype=np.int64).reshape(-1, 3)
    expected = np.unique(cells, axis=0)
    assert np.array_equal(unique_cells(cells), expected)


def test_point_in_boxes_equals_the_broadcast_definition():
    rng = np.random.default_rng(3)
    points = rng.uniform(-1, 1, (500, 3))
    boxes = np.sort(rng.uniform(-1, 1, (7, 2, 3)), axis=1).reshape(7, 6)
    lo, hi = boxes[:, None, :3] - 0.02, boxes[:, None, 3:] + 0.02
    expected = np.any(np.all((points[None] >= lo) & (points[None] <= hi), axis=2), axis=0)
    assert expected.any() and not expected.all()
    assert np.array_equal(in_boxes(points, boxes, 0.02), expected)
    assert np.array_equal(in_boxes(points, boxes[0], 0.02), expected_one := np.all(
        (points >= boxes[0, :3] - 0.02) & (points <= boxes[0, 3:] + 0.02), axis=1)) and expected_one.any()
    assert not in_boxes(points, np.zeros((0, 6))).any() and len(in_boxes(np.zeros((0, 3)), boxes)) == 0


def test_a_solid_slab_merges_into_one_box():
    cells = np.array([(i, j, 0) for i in range(5) for j in range(4)])
    assert merge_voxels(cells).tolist() == [[0, 0, 0, 5, 4, 1]]


# ------------------------------------------------------------------------------------------------ grasps from points


def _box_cloud(centre, size):
    """Surface points and outward normals of a box standing on z = 0 (its visible faces: not the bottom)."""
    c, h = np.asarray(centre, dtype=float), np.asarray(size, dtype=float) / 2
    pts, nrm = [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            if axis == 2 and sign < 0:
                continue
            others = [i for i in range(3) if i != axis]
            a, b = np.meshgrid(np.arange(-h[others[0]], h[others[0]] + 1e-9, 0.004),
                               np.arange(-h[others[1]], h[others[1]] + 1e-9, 0.004))
            face = np.zeros((a.size, 3))
            face[:, axis] = sign * h[axis]
            face[:, others[0]], face[:, others[1]] = a.ravel(), b.ravel()
            n = np.zeros((a.size, 3))
            n[:, axis] = sign
            pts.append(face + c)
            nrm.append(n)
    return np.concatenate(pts), np.concatenate(nrm)


def _table(extent=0.3, z=0.0):
    g = np.arange(-extent, extent, 0.005)
    a, b = np.meshgrid(g, g)
    return np.column_stack([a.ravel() + 0.5, b.ravel(), np.full(a.size, z)])


HAND = Hand(max_opening=0.072, finger_reach=0.011, base=(0.0, 0.0, 0.0))


def test_sampler_finds_an_antipodal_grasp_across_the_narrow_side_that_clears_the_table():
    pts, nrm = _box_cloud((0.5, 0.0, 0.04), (0.04, 0.12, 0.08))
    scene = np.concatenate([pts, _table()])
    candidates = point_grasps.sample(pts, nrm, scene, HAND, support_z=0.0)
    assert candidates
    best = candidates[0]
    R = matrix_from_quat(best.pose.orientation)
    assert abs(R[0, 1]) > 0.95  # fingers close along x, across the 4 cm side
    assert best.width < HAND.max_opening
    assert best.pose.position[2] > HAND.finger_reach  # fingertips above the table
    assert point_grasps.best_grasp(candidates, reachable=lambda p: False) is None


def test_sampler_refuses_objects_wider_than_the_fingers_open():
    pts, nrm = _box_cloud((0.5, 0.0, 0.04), (0.10, 0.10, 0.08))
    assert point_grasps.sample(pts, nrm, np.concatenate([pts, _table()]), HAND, support_z=0.0) == []


def test_sampler_follows_a_preferred_position_along_a_long_object():
    pts, nrm = _box_cloud((0.5, 0.0, 0.02), (0.04, 0.24, 0.04))
    scene = np.concatenate([pts, _table()])
    left = point_grasps.sample(pts, nrm, scene, HAND, 0.0, preferred_position=np.array([0.5, 0.08, 0.02]))[0]
    right = point_grasps.sample(pts, nrm, scene, HAND, 0.0, preferred_position=np.array([0.5, -0.08, 0.02]))[0]
    assert left.pose.position[1] > 0.03 and right.pose.position[1] < -0.03


def test_learned_grasp_backends_are_slots_with_a_clear_error():
    for name, module in (("anygrasp", "gsnet"), ("giga", "vgn")):
        with pytest.raises(BackendUnavailable, match=module):
            create_grasp_backend(name)
    assert create_grasp_backend("point-sampler") is not None


# ------------------------------------------------------------------------------------------------ grounding


def test_phrases_and_shared_phrases_are_assigned_top_down():
    assert phrase("white_bowl") == "white bowl" and phrase("cabinet.drawer_1") == "drawer"
    found = [Detection("drawer", 0.9, (10, 50, 90, 70)), Detection("drawer", 0.8, (10, 10, 90, 30)),
             Detection("drawer", 0.1, (10, 90, 90, 99)), Detection("apple", 0.7, (1, 1, 5, 5)),
             Detection("apple", 0.3, (50, 50, 55, 55))]
    named = {d.label: d.box for d in assign_names(found, ["cabinet.drawer_0", "cabinet.drawer_1", "apple"])}
    assert named["cabinet.drawer_0"] == (10, 10, 90, 30) and named["cabinet.drawer_1"] == (10, 50, 90, 70)
    assert named["apple"] == (1, 1, 5, 5)


def test_sim_seg_needs_a_segmentation_image():
    spec = _ring(1)[0]
    frame = CameraFrame(spec, np.zeros((spec.height, spec.width, 3), np.uint8),
                        np.ones((spec.height, spec.width), np.float32))
    with pytest.raises(BackendUnavailable, match="segmentation"):
        create_grounder(GroundingParams()).detect([frame], ["apple"])


def _tiny_owlvit(path):
    """The tiny random OWL-ViT the ablation's detector setting uses (tasks/roboscript/eval/tiny_detector.py)."""
    from tasks.roboscript.eval.tiny_detector import build_tiny_owlvit

    return build_tiny_owlvit(path / "owlvit")


@pytest.mark.slow
def test_detector_backend_runs_a_tiny_random_owlvit_from_a_local_checkpoint(tmp_path):
    """The hf-detector code path for real: AutoModelForZeroShotObjectDetection + AutoProcessor from a directory,
    post-processing, phrase -> name assignment. A random model finds random boxes; the test checks their form."""
    model = _tiny_owlvit(tmp_path)
    grounder = create_grounder(GroundingParams(backend="hf-detector", model_path=str(model), threshold=0.0))
    spec = _ring(1)[0]
    rng = np.random.default_rng(0)
    frame = CameraFrame(spec, rng.integers(0, 255, (spec.height, spec.width, 3), dtype=np.uint8),
                        np.ones((spec.height, spec.width), np.float32))
    names = ["apple", "white_bowl", "cabinet.drawer_0", "cabinet.drawer_1"]
    (found,) = grounder.detect([frame], names)
    # OWL-ViT gives each predicted box the one query it scores highest: at threshold 0 a phrase can still get none
    labels = [d.label for d in found]
    assert len(labels) >= 2 and len(set(labels)) == len(labels) and set(labels) <= set(names)
    for d in found:
        x0, y0, x1, y1 = d.box
        assert 0 <= x0 < x1 <= spec.width and 0 <= y0 < y1 <= spec.height and 0.0 <= d.score <= 1.0
    drawers = sorted((d for d in found if "drawer" in d.label), key=lambda d: d.label)
    if len(drawers) == 2:
        assert sum(drawers[0].box[1::2]) <= sum(drawers[1].box[1::2])  # drawer_0 is the upper one
    assert grounder.detect([frame], []) == [[]]


def test_detector_backend_without_a_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(BackendUnavailable, match="model_path"):
        create_grounder(GroundingParams(backend="hf-detector"))
    with pytest.raises(BackendUnavailable, match="config.json"):
        create_grounder(GroundingParams(backend="hf-detector", model_path=str(tmp_path)))


# ------------------------------------------------------------------------------------------------ settings


@pytest.mark.parametrize(("update", "message"), [
    ({"cameras": {"cameras": [{"name": "a", "eye": [0, 0, 1], "target": [1, 0, 0]}]}}, "k >= 3"),
    ({"cameras": {"cameras": [{"name": "a", "eye": [0, 0, 1], "target": [1, 0, 0]}] * 3}}, "repeat"),
    ({"cameras": {"cameras": [{"name": "a", "eye": [0, 0, 1], "target": [0, 0, 1]},
                              {"name": "b", "eye": [0, 0, 1], "target": [1, 0, 0]},
                              {"name": "c", "eye": [0, 1, 1], "target": [1, 0, 0]}]}}, "same point"),
    ({"grounding": {"backend": "glip"}}, "unknown grounding backend 'glip'"),
    ({"grasp": "magic"}, "unknown grasp backend 'magic'"),
    ({"fusion": {"voxel_m": 0.01, "trunc_m": 0.015}}, "at least two voxels"),
    ({"detection": "maybe"}, "detection"),
])
def test_bad_pipeline_settings_name_the_field(update, message):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        PipelineParams.model_validate(update)


def test_a_goal_asking_for_an_unavailable_backend_fails_at_the_goal():
    from robot.contract.catalog import load_catalog
    from robot.episode import parse_goal
    from tasks.roboscript.benchmark import load_benchmark
    from tasks.roboscript.params import WorldsParams

    world = load_benchmark(load_catalog(), WorldsParams())[0].world.to_json()
    base = {"code": "detect_objects()", "world": world, "perception": "perceived"}
    with pytest.raises(GoalError, match="AnyGrasp"):
        parse_goal(json.dumps(base | {"pipeline": {"grasp": "anygrasp"}}))
    with pytest.raises(GoalError, match="model_path"):
        parse_goal(json.dumps(base | {"pipeline": {"grounding": {"backend": "hf-detector"}}}))
    with pytest.raises(GoalError, match="pipeline settings at fusion.voxel_m"):
        parse_goal(json.dumps(base | {"pipeline": {"fusion": {"voxel_m": -1}}}))
    assert parse_goal(json.dumps(base)).pipeline == PipelineParams()


def test_fusion_defaults_keep_a_truncation_of_several_voxels():
    f = FusionParams()
    assert f.trunc_m >= 3 * f.voxel_m
    CameraParams(name="ok", eye=(0, 0, 1), target=(1, 0, 0))


def test_ablation_trials_cover_settings_studies_and_objects_and_name_a_bad_object():
    from core.errors import ConfigError
    from robot.contract.catalog import load_catalog
    from tasks.roboscript.eval import ablation
    from tasks.roboscript.params import AblationParams, RobotEvalParams, WorldsParams

    ep = RobotEvalParams(ablation=AblationParams(objects=["apple", "blue_block"], settings=["gt", "no_gt"]))
    trials, skipped = ablation.trials(load_catalog(), WorldsParams(), ep)
    assert len(trials) == 2 * 2 * 2 and not skipped
    goals = {t.key: ablation.goal(t, ep) for t in trials}
    assert goals["gt/drawer/apple"]["perception"] == "ground_truth"
    nogt = goals["no_gt/pick_place/blue_block"]
    assert nogt["perception"] == "perceived" and nogt["repeats"] == 2
    assert nogt["pipeline"]["detection"] == nogt["pipeline"]["planning_scene"] == "perceived"
    bad = RobotEvalParams(ablation=AblationParams(objects=["apple", "unicorn"]))
    with pytest.raises(ConfigError, match="roboscript.eval.ablation.objects: .*unicorn"):
        ablation.trials(load_catalog(), WorldsParams(), bad)


def test_ablation_goals_group_a_study_and_objects_perceived_settings_and_give_each_trial_its_result():
    from robot.contract.catalog import load_catalog
    from robot.episode import parse_goal
    from tasks.roboscript.eval import ablation
    from tasks.roboscript.params import AblationParams, RobotEvalParams, WorldsParams

    ep = RobotEvalParams(ablation=AblationParams(objects=["apple", "blue_block"], studies=["pick_place"],
                                                 settings=["gt", "gt_planning_scene", "gt_detection", "no_gt"]))
    trials, _ = ablation.trials(load_catalog(), WorldsParams(), ep)
    single = {t.key: ablation.goal(t, ep) for t in trials}
    requests = ablation.goals(trials, ep)
    assert list(requests) == ["perceived/pick_place/apple", "perceived/pick_place/blue_block",
                              "gt/pick_place/apple", "gt/pick_place/blue_block"]  # the long goals first
    assert requests["gt/pick_place/apple"] == single["gt/pick_place/apple"]
    group = requests["perceived/pick_place/apple"]
    assert [v["episode_id"] for v in group["variants"]] == [f"{s}/pick_place/apple"
                                                            for s in ("gt_planning_scene", "gt_detection", "no_gt")]
    for variant in group["variants"]:  # each variant is its trial's goal, nothing else
        alone = single[variant["episode_id"]]
        assert {k: v for k, v in group.items() if k != "variants"} | variant == alone | {"episode_id": variant[
            "episode_id"]} and "perception" not in group and "pipeline" not in group
    assert len(parse_goal(json.dumps(group)).variants) == 3

    def result(trial, success):
        return {"ok": True, "episode_id": trial, "repeats": [{"status": "ok", "success": success}]}

    ran = {"perceived/pick_place/apple": {"ok": True, "goal_state": "SUCCEEDED",
                                          "variants": [result(v["episode_id"], True) for v in group["variants"]],
                                          "perception_shared": {"fuse": {"computed": 2, "reused": 4}}},
           "perceived/pick_place/blue_block": {"ok": False, "error": "runner gone", "repeats": []},
           "gt/pick_place/apple": result("gt/pick_place/apple", True),
           "gt/pick_place/blue_block": result("gt/pick_place/blue_block", False)}
    trials_out = ablation.trial_results(ran, requests)
    assert set(trials_out) == set(single)
    assert trials_out["no_gt/pick_place/apple"] == result("no_gt/pick_place/apple", True) | {"goal_state": "SUCCEEDED"}
    assert trials_out["no_gt/pick_place/blue_block"]["error"] == "runner gone"  # a goal that failed fails its trials
    assert ablation.failures(trials_out)["gt_detection/pick_place/blue_block"] == {"error": 1}
    assert ablation.shared_counts(ran) == {"fuse": {"computed": 2, "reused": 4}}
    lone = RobotEvalParams(ablation=AblationParams(objects=["apple"], studies=["drawer"], settings=["gt", "no_gt"]))
    trials, _ = ablation.trials(load_catalog(), WorldsParams(), lone)
    assert ablation.goals(trials, lone) == {t.key: ablation.goal(t, lone) for t in trials}  # nothing to share


def test_a_goal_with_variants_is_checked_variant_by_variant():
    from robot.contract.catalog import load_catalog
    from robot.episode import parse_goal
    from tasks.roboscript.eval import shapes
    from tasks.roboscript.params import WorldsParams

    trial = shapes.study_trials(load_catalog(), WorldsParams(), ["apple"], ["pick_place"])[0][0]
    base = {"code": "pass", "world": trial.world.to_json()}
    assert parse_goal(json.dumps(base)).variants == []
    with pytest.raises(GoalError, match="'variants' item 1: unknown perception mode 'psychic'"):
        parse_goal(json.dumps(base | {"variants": [{"episode_id": "a", "perception": "ground_truth"},
                                                   {"episode_id": "b", "perception": "psychic"}]}))
    with pytest.raises(GoalError, match="'variants' item 0: the goal has no 'episode_id'"):
        parse_goal(json.dumps(base | {"variants": [{"perception": "ground_truth"}]}))
    with pytest.raises(GoalError, match="'variants' item 0: unknown field.*seed"):
        parse_goal(json.dumps(base | {"variants": [{"episode_id": "a", "seed": 3}]}))
    with pytest.raises(GoalError, match="distinct episode_ids"):
        parse_goal(json.dumps(base | {"variants": [{"episode_id": "a"}, {"episode_id": "a"}]}))
    with pytest.raises(GoalError, match="in each variant, not at its top"):
        parse_goal(json.dumps(base | {"perception": "noisy", "variants": [{"episode_id": "a"}]}))
    with pytest.raises(GoalError, match="'variants' item 0: invalid pipeline settings at fusion.voxel_m"):
        parse_goal(json.dumps(base | {"variants": [{"episode_id": "a", "pipeline": {"fusion": {"voxel_m": -1}}}]}))


def test_the_memo_reuses_a_stage_only_for_the_same_inputs_and_generator_state_and_leaves_that_state_as_computed():
    import numpy as np

    from robot.perception.shared import PerceptionMemo, digest

    memo = PerceptionMemo()
    calls = []

    def draw(rng):
        def compute():
            calls.append(1)
            return {"values": rng.random(3)}
        return compute

    a, b = np.random.default_rng(5), np.random.default_rng(5)
    first, key = memo.stage("capture", (np.zeros(3), "x"), draw(a), (a,))
    again, same_key = memo.stage("capture", (np.zeros(3), "x"), draw(b), (b,))
    assert len(calls) == 1 and key == same_key and np.array_equal(first["values"], again["values"])
    assert a.random() == b.random()  # b was left where computing would have left it
    again["values"][:] = 0  # a copy: a variant's changes never reach the memo
    assert memo.stage("capture", (np.zeros(3), "x"), draw(np.random.default_rng(5)),
                      (np.random.default_rng(5),))[0]["values"].any()
    memo.stage("capture", (np.zeros(3), "x"), draw(np.random.default_rng(6)), (np.random.default_rng(6),))
    memo.stage("capture", (np.full(3, 1e-12), "x"), draw(np.random.default_rng(5)), (np.random.default_rng(5),))
    memo.stage("capture", (np.zeros(3, np.float32), "x"), draw(np.random.default_rng(5)), (np.random.default_rng(5),))
    assert len(calls) == 4 and memo.counts == {"capture": {"computed": 4, "reused": 2}}
    assert digest(np.zeros((2, 3))) != digest(np.zeros((3, 2))) and digest([1, 2]) != digest([2, 1])


def test_ablation_summary_means_drops_and_report_text():
    from tasks.roboscript.eval import ablation

    def result(*successes):
        return {"ok": True, "repeats": [{"status": "ok", "success": s, "perception": {"wall_s": 0.5}} for s in successes]}

    results = {"gt/pick_place/apple": result(True, True), "no_gt/pick_place/apple": result(True, False),
               "gt/drawer/apple": result(True, False), "no_gt/drawer/apple": result(False, False)}
    summary = ablation.summarise(results, ["gt", "no_gt"])
    assert summary["mean"] == {"gt": {"drawer": 0.5, "pick_place": 1.0}, "no_gt": {"drawer": 0.0, "pick_place": 0.5}}
    assert summary["drop_points"] == {"no_gt": {"drawer": 50.0, "pick_place": 50.0}}
    assert ablation.failures(results)["no_gt/pick_place/apple"] == {"success": 1, "failed": 1}
    assert ablation.perception_seconds(results) == {"gt": 0.5, "no_gt": 0.5}
    text = ablation.markdown(summary, ["gt", "no_gt"], 2)
    assert text.index("## pick and place") < text.index("## open drawer and place") and "| apple | 1.00 | 0.50 |" in text
    header = text.split("## pick and place")[0]
    assert "simulator's segmentation masks" in header and "random weights" in header  # said before any number
    assert "simulator's segmentation masks" not in ablation.markdown(summary, ["gt", "no_gt"], 2, "hf-detector")


def test_the_detector_setting_puts_a_grounding_model_in_the_loop(tmp_path):
    from core.errors import ConfigError
    from robot.contract.catalog import load_catalog
    from tasks.roboscript.eval import ablation
    from tasks.roboscript.params import AblationParams, RobotEvalParams, WorldsParams

    ep = RobotEvalParams(ablation=AblationParams(objects=["apple"], studies=["pick_place"],
                                                 settings=["gt_planning_scene", "detector_model"]))
    trials, _ = ablation.trials(load_catalog(), WorldsParams(), ep)
    by_setting = {t.setting: t for t in trials}
    plain = ablation.goal(by_setting["gt_planning_scene"], ep, tmp_path)
    model = ablation.goal(by_setting["detector_model"], ep, tmp_path)
    assert plain["pipeline"]["grounding"]["backend"] == "sim-seg"  # the simulator's masks
    assert model["pipeline"]["grounding"] | {"backend": "hf-detector", "model_path": str(tmp_path)} == \
        model["pipeline"]["grounding"]
    assert model["pipeline"]["detection"] == "perceived" and model["pipeline"]["planning_scene"] == "ground_truth"
    with pytest.raises(ConfigError, match="detector checkpoint"):
        ablation.goal(by_setting["detector_model"], ep)


@pytest.mark.slow
def test_the_ablations_tiny_detector_checkpoint_loads_in_the_grounding_backend(tmp_path):
    from tasks.roboscript.eval.tiny_detector import build_tiny_owlvit

    path = build_tiny_owlvit(tmp_path / "owlvit")
    assert build_tiny_owlvit(path) == path  # built once
    grounder = create_grounder(GroundingParams(backend="hf-detector", model_path=str(path), threshold=0.0))
    spec = _ring(1)[0]
    frame = CameraFrame(spec, np.random.default_rng(1).integers(0, 255, (spec.height, spec.width, 3), dtype=np.uint8),
                        np.ones((spec.height, spec.width), np.float32))
    (found,) = grounder.detect([frame], ["apple", "sponge"])
    assert {d.label for d in found} <= {"apple", "sponge"}


def test_fused_points_come_out_in_one_order_and_planes_are_repeatable():
    """Open3D hands fused points out in its threads' order: canonical_order makes any permutation the same cloud, and
    fit_plane (our seeded RANSAC) gives the same plane every time on the same points."""
    import open3d as o3d

    from robot.perception.fusion import canonical_order, fit_plane

    rng = np.random.default_rng(1)
    table = np.c_[rng.uniform(-0.3, 0.3, (400, 2)), 0.7 + rng.normal(0, 0.001, 400)]
    clutter = rng.uniform([-0.3, -0.3, 0.7], [0.3, 0.3, 0.9], (150, 3))
    points = np.vstack([table, clutter])
    clouds = [o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points[rng.permutation(len(points))]))
              for _ in range(3)]
    ordered = [np.asarray(canonical_order(c).points) for c in clouds]
    assert all(np.array_equal(ordered[0], o) for o in ordered[1:])
    # points closer than the 0.1 mm cells (TSDF fusion gives such pairs) and points at one place in two colours: any
    # order of them is one cloud, colours with it
    base = rng.uniform(-0.3, 0.3, (60, 3))
    near = np.vstack([base, base + rng.uniform(-2e-5, 2e-5, base.shape), base[:20]])
    colours = np.vstack([rng.uniform(0, 1, (120, 3)), rng.uniform(0, 1, (20, 3))])
    outs = []
    for _ in range(4):
        perm = rng.permutation(len(near))
        cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(near[perm]))
        cloud.colors = o3d.utility.Vector3dVector(colours[perm])
        out = canonical_order(cloud)
        outs.append(np.c_[np.asarray(out.points), np.asarray(out.colors)])
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
    assert sorted(map(tuple, outs[0])) == sorted(map(tuple, np.c_[near, colours]))   # the same points, each its colour
    fits = [fit_plane(ordered[0], 0.004, 200, 50) for _ in range(2)]
    normal, d, inliers = fits[0]
    assert np.array_equal(normal, fits[1][0]) and d == fits[1][1] and np.array_equal(inliers, fits[1][2])
    assert abs(abs(normal[2]) - 1) < 1e-3 and abs(abs(d) - 0.7) < 2e-3 and len(inliers) >= 390
