"""RoboScript evaluation, mirroring ``tasks/muep/eval``: benchmark code on a runner pool, Table II metrics, the
perception ablation, the object-shape study and the leaderboard section."""
