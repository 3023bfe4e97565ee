"""Model conversion library for framemill (TF.js graph models and ISNet to ONNX + fmg)."""
