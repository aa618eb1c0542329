"""RGB-D frames as ROS messages: what a real robot's camera drivers publish, and what the pipeline reads from them.

Per camera ``<ns>/<camera>/``, the topics of a RealSense-style driver with depth aligned to colour:

* ``color/image_raw`` -- ``sensor_msgs/Image``, ``rgb8``;
* ``aligned_depth_to_color/image_raw`` -- ``sensor_msgs/Image``, ``32FC1`` metres (``16UC1`` millimetres is read
  too, as most drivers send it);
* ``color/camera_info`` -- ``sensor_msgs/CameraInfo`` (K; the pipeline does not undistort);
* ``segmentation/image_raw`` -- optional ``32SC1`` label indices, and ``segmentation/labels`` (``std_msgs/String``,
  a JSON list): what a simulator's segmentation camera (Gazebo, Isaac) gives; real cameras have none.

Extrinsics are calibration (the camera's ``eye``/``target`` in params.yaml), as a static transform would be.
:class:`CameraTopics` subscribes and hands the pipeline one fresh frame per camera; :class:`CameraPublisher`
publishes frames (the simulator's, for RViz or to drive a pipeline in another process).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import numpy as np

from robot.contract.params import CameraRigParams
from robot.errors import GoalError, RobotError
from robot.perception.cameras import CameraFrame, CameraSpec

MASTER_GRACE_S = 10.0
TOPICS = {"color": "color/image_raw", "depth": "aligned_depth_to_color/image_raw", "info": "color/camera_info",
          "segmentation": "segmentation/image_raw", "labels": "segmentation/labels"}


def _topic(ns: str, camera: str, kind: str) -> str:
    return f"{ns.rstrip('/')}/{camera}/{TOPICS[kind]}"


def to_messages(frame: CameraFrame) -> dict:
    """The frame as ROS messages: {"color", "depth", "info"[, "segmentation", "labels"]}."""
    import rospy
    from sensor_msgs.msg import CameraInfo, Image
    from std_msgs.msg import String

    spec = frame.spec
    stamp = rospy.Time.from_sec(frame.stamp)

    def image(data: np.ndarray, encoding: str, step: int) -> Image:
        msg = Image(height=spec.height, width=spec.width, encoding=encoding, is_bigendian=0, step=step,
                    data=np.ascontiguousarray(data).tobytes())
        msg.header.stamp, msg.header.frame_id = stamp, f"{spec.name}_optical_frame"
        return msg

    info = CameraInfo(height=spec.height, width=spec.width, distortion_model="plumb_bob", D=[0.0] * 5,
                      K=spec.K.reshape(-1).tolist(), R=np.eye(3).reshape(-1).tolist(),
                      P=np.hstack([spec.K, np.zeros((3, 1))]).reshape(-1).tolist())
    info.header.stamp, info.header.frame_id = stamp, f"{spec.name}_optical_frame"
    out = {"color": image(frame.rgb.astype(np.uint8), "rgb8", 3 * spec.width),
           "depth": image(frame.depth.astype("<f4"), "32FC1", 4 * spec.width), "info": info}
    if frame.segmentation is not None:
        out["segmentation"] = image(frame.segmentation.astype("<i4"), "32SC1", 4 * spec.width)
        out["labels"] = String(data=json.dumps(list(frame.labels)))
    return out


def _pixels(msg, dtype: str, channels: int) -> np.ndarray:
    arr = np.frombuffer(bytes(msg.data), dtype=np.dtype(dtype).newbyteorder(">" if msg.is_bigendian else "<"))
    row = msg.step // np.dtype(dtype).itemsize
    arr = arr.reshape(msg.height, row)[:, : msg.width * channels]
    return arr.reshape(msg.height, msg.width, channels) if channels > 1 else arr.reshape(msg.height, msg.width)


def from_messages(spec: CameraSpec, color, depth, info=None, segmentation=None, labels=None) -> CameraFrame:
    """A frame from a camera's messages; the calibration ``spec`` gives the pose (and K, checked against
    CameraInfo's when one is given)."""
    if (color.width, color.height) != (spec.width, spec.height) or (depth.width, depth.height) != (
            spec.width, spec.height):
        raise RobotError(f"camera {spec.name}: images of {color.width}x{color.height} / {depth.width}x{depth.height}"
                         f" do not match its {spec.width}x{spec.height} calibration")
    if info is not None and not np.allclose(np.asarray(info.K).reshape(3, 3), spec.K, atol=1e-3):
        raise RobotError(f"camera {spec.name}: its CameraInfo K differs from the calibration in params.yaml")
    if color.encoding == "rgb8":
        rgb = _pixels(color, "u1", 3)
    elif color.encoding == "bgr8":
        rgb = _pixels(color, "u1", 3)[:, :, ::-1]
    else:
        raise RobotError(f"camera {spec.name}: colour encoding {color.encoding!r}; rgb8 or bgr8 expected")
    if depth.encoding == "32FC1":
        z = _pixels(depth, "f4", 1).astype(np.float32)
    elif depth.encoding == "16UC1":
        z = _pixels(depth, "u2", 1).astype(np.float32) / 1000.0
    else:
        raise RobotError(f"camera {spec.name}: depth encoding {depth.encoding!r}; 32FC1 or 16UC1 expected")
    z = np.where(np.isfinite(z), z, 0.0).astype(np.float32)
    seg, names = None, ()
    if segmentation is not None and labels is not None:
        seg = _pixels(segmentation, "i4", 1).astype(np.int32)
        names = tuple(json.loads(labels.data))
    return CameraFrame(spec, np.ascontiguousarray(rgb), z, color.header.stamp.to_sec(), seg, names)


class CameraPublisher:
    """Publishes frames on the camera topics (needs an initialised rospy node)."""

    def __init__(self, specs: list[CameraSpec], ns: str = "/cameras"):
        import rospy
        from sensor_msgs.msg import CameraInfo, Image
        from std_msgs.msg import String

        kinds = {"color": Image, "depth": Image, "info": CameraInfo, "segmentation": Image, "labels": String}
        self.pubs = {(s.name, k): rospy.Publisher(_topic(ns, s.name, k), t, queue_size=2, latch=True)
                     for s in specs for k, t in kinds.items()}

    def publish(self, frames: list[CameraFrame]) -> None:
        for frame in frames:
            for kind, msg in to_messages(frame).items():
                self.pubs[(frame.spec.name, kind)].publish(msg)


class CameraTopics:
    """The camera topics of a robot, subscribed: :meth:`capture` returns each camera's next frame -- with its
    segmentation image too when ``segmentation`` (a simulator's driver; real cameras have none)."""

    def __init__(self, specs: list[CameraSpec], ns: str = "/cameras", timeout_s: float = 5.0,
                 segmentation: bool = False):
        import rospy
        from sensor_msgs.msg import CameraInfo, Image
        from std_msgs.msg import String

        self.specs, self.timeout_s, self.segmentation = specs, timeout_s, segmentation
        self._latest: dict[tuple[str, str], object] = {}
        self._lock = threading.Lock()
        kinds = {"color": Image, "depth": Image, "info": CameraInfo, "segmentation": Image, "labels": String}
        self._subs = [rospy.Subscriber(_topic(ns, s.name, k), t, self._store, callback_args=(s.name, k),
                                       queue_size=1) for s in specs for k, t in kinds.items()]

    def _store(self, msg, key) -> None:
        with self._lock:
            self._latest[key] = msg

    def _ready(self, name: str, since: float) -> bool:
        kinds = ("color", "depth", "segmentation") if self.segmentation else ("color", "depth")
        images = [self._latest.get((name, k)) for k in kinds]
        if self.segmentation and (name, "labels") not in self._latest:
            return False
        return all(m is not None and m.header.stamp.to_sec() >= since for m in images)

    def capture(self, since: float | None = None) -> list[CameraFrame]:
        """One frame per camera with both images stamped at or after ``since`` (default: any received)."""
        since = 0.0 if since is None else since
        deadline = time.monotonic() + self.timeout_s
        while True:
            with self._lock:
                missing = [s.name for s in self.specs if not self._ready(s.name, since)]
                if not missing:
                    kinds = ("color", "depth", "info", "segmentation", "labels")
                    return [from_messages(s, *(self._latest.get((s.name, k)) if self.segmentation or k in kinds[:3]
                                               else None for k in kinds)) for s in self.specs]
            if time.monotonic() > deadline:
                raise RobotError(f"no images from camera(s) {', '.join(missing)} within {self.timeout_s:g} s")
            time.sleep(0.01)


def camera_rig_from(params_file: Path) -> CameraRigParams:
    """``roboscript.eval.pipeline.cameras`` of a params file, validated (the defaults where it says nothing)."""
    import yaml
    from pydantic import ValidationError

    raw = yaml.safe_load(params_file.read_text(encoding="utf-8")) if params_file.exists() else None
    for key in ("roboscript", "eval", "pipeline", "cameras"):
        raw = raw.get(key) if isinstance(raw, dict) else None
    try:
        return CameraRigParams.model_validate(raw or {})
    except ValidationError as exc:
        raise GoalError(f"{params_file}: roboscript.eval.pipeline.cameras: {exc.errors()[0]['msg']}") from None


def main(argv: list[str] | None = None) -> int:
    """``python -m robot.perception.ros_cameras --world W.json``: the simulator's cameras as a ROS camera driver
    (for RViz, or to feed a pipeline in another process), publishing ``--rate`` frame sets per second."""
    import argparse

    from robot import ros_env

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--world", required=True, help="a world definition file (roboscript-world/1)")
    parser.add_argument("--ns", default="/cameras", help="topic namespace (default /cameras)")
    parser.add_argument("--rate", type=float, default=2.0, help="frame sets per second")
    parser.add_argument("--params", default="params.yaml",
                        help="params file whose roboscript.eval.pipeline.cameras to use (default: params.yaml; "
                             "the defaults when the file or the key is absent)")
    args = parser.parse_args(argv)
    ros_env.activate()
    import rospy

    from robot.backends import create_backend
    from robot.client import master_up
    from robot.contract.world import read_world
    from robot.perception.cameras import rig

    rig_params = camera_rig_from(Path(args.params))
    backend = create_backend("sim")
    backend.load_world(read_world(args.world))
    backend.reset(0)
    specs = rig(rig_params, backend.world.table.height)
    rospy.init_node("embp_sim_cameras", anonymous=True)
    publisher = CameraPublisher(specs, args.ns)
    rng = np.random.default_rng(0)
    print(f"sim cameras: publishing {', '.join(s.name for s in specs)} under {args.ns}", flush=True)
    rate = rospy.Rate(args.rate)
    master, last_seen = os.environ.get("ROS_MASTER_URI", "http://localhost:11311"), time.monotonic()
    while not rospy.is_shutdown():
        publisher.publish(backend.capture(specs, rng, rig_params.depth_noise_m))
        rate.sleep()
        if master_up(master, timeout_s=1.0):
            last_seen = time.monotonic()
        elif time.monotonic() - last_seen > MASTER_GRACE_S:  # rospy cannot re-register with a new master
            print(f"sim cameras: the ROS master at {master} is gone; exiting", flush=True)
            return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
