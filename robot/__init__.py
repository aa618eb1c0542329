"""The ROS side (runner node, robot backends, perception + motion tool API): built by the ROS runner issue."""
