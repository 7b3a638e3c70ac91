"""The networks: interface, kinds, checkpoints, the file format and the ONNX export."""
