"""The players: the heuristic, random, policy, ONNX, remote and search agents."""
