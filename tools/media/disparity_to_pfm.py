#!/usr/bin/env python3
"""Writes the ground-truth disparity that python3-skimage ships with Middlebury's
motorcycle stereo pair (motorcycle_disp.npz) as a PFM that OpenCV reads (imread).
Unknown pixels stay infinite. Usage: disparity_to_pfm.py IN.npz OUT.pfm"""
import sys

import numpy as np

disparity = np.load(sys.argv[1])["arr_0"].astype("<f4")
with open(sys.argv[2], "wb") as f:
    f.write(b"Pf\n%d %d\n-1.0\n" % (disparity.shape[1], disparity.shape[0]))
    f.write(np.flipud(disparity).tobytes())  # PFM rows run from the bottom up
