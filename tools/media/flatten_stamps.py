#!/usr/bin/python3
"""Lays Tux Paint's stamps on white: flatten_stamps.py STAMPS_DIR OUT_DIR.

Each PNG under STAMPS_DIR (an object cut out on a transparent ground) is written to the same
relative path under OUT_DIR as an RGB PNG, its transparent pixels white. The stamps keep colour
under the transparent pixels (Tux Paint never shows it), which a picture read without its alpha
channel would show as a smeared ground: white is how a catalogue photographs one object.
"""
import pathlib
import sys

import cv2
import numpy as np


def flatten(src: pathlib.Path, dst: pathlib.Path) -> bool:
    image = cv2.imread(str(src), cv2.IMREAD_UNCHANGED)
    if image is None:
        return False
    if image.ndim == 2:
        image = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    if image.shape[2] == 4:
        alpha = image[:, :, 3:4].astype(np.float32) / 255.0
        image = (image[:, :, :3] * alpha + 255.0 * (1.0 - alpha)).round().astype(np.uint8)
    dst.parent.mkdir(parents=True, exist_ok=True)
    return cv2.imwrite(str(dst), image)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    stamps, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    written = sum(flatten(p, out / p.relative_to(stamps)) for p in sorted(stamps.rglob("*.png")))
    print(f"fetch_photos: {written} stamps laid on white in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
