#!/usr/bin/python3
"""Unpacks the files of Qt resource bundles (.rcc, format versions 1-3):
    qt_rcc.py OUT_DIR FILE.rcc...
Header "qres", version, tree, data and names offsets (big-endian); tree nodes of 14 bytes
(22 from version 2: plus a modification time); a directory node holds its child count and
first child, a file node its data offset; zlib-compressed data (flag 1) starts with its size.
zstd-compressed files (flag 4) are skipped with a note."""
import struct, sys, zlib, os
def extract(path, out):
    b = open(path,'rb').read()
    assert b[:4]==b'qres', path
    ver, tree, data, names = struct.unpack('>IIII', b[4:20])
    node = 22 if ver >= 2 else 14
    def name(off):
        n, = struct.unpack('>H', b[names+off:names+off+2])
        return b[names+off+6:names+off+6+2*n].decode('utf-16-be')
    res=[]
    def walk(i, prefix):
        p = tree + i*node
        noff, flags = struct.unpack('>IH', b[p:p+6])
        nm = name(noff) if i else ''
        if flags & 2:
            cnt, first = struct.unpack('>II', b[p+6:p+14])
            for c in range(cnt): walk(first+c, prefix+nm+'/')
        else:
            doff, = struct.unpack('>I', b[p+10:p+14])
            q = data+doff; size, = struct.unpack('>I', b[q:q+4]); blob = b[q+4:q+4+size]
            if flags & 1: blob = zlib.decompress(blob[4:])
            elif flags & 4:
                print(f'qt_rcc: {prefix + nm}: zstd, skipped', file=sys.stderr)
                return
            res.append((prefix+nm, blob))
    walk(0, '')
    for n, blob in res:
        f = os.path.join(out, n.lstrip('/'))
        os.makedirs(os.path.dirname(f), exist_ok=True); open(f,'wb').write(blob)
    return len(res)
for p in sys.argv[2:]:
    print(p, extract(p, sys.argv[1]))
