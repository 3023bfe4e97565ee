#!/usr/bin/python3
"""Near-duplicate signals, measured before the `dedup` stage is built (issue 29).

Real photos from tests/data/content_labels.csv and content_holdout.csv (the photo rows, near
duplicates among them left out), each with five copies: half size, JPEG quality 30, a 10%
crop, a 3-degree rotation, brightness +30. For each signal: the similarity of every copy to
its original, the closest pair of distinct photos, and, for rules "embedding >= t or pHash
distance <= h" with groups closed transitively (union-find), the share of copy pairs grouped
and the groups that join two distinct photos. The embedding is the nsfw model's pooled
features (FRAMEMILL_MODELS, default .cache/models), L2-normalised; pHash is OpenCV contrib's
img_hash. usage: /usr/bin/python3 bench/dedup_signals.py"""
import cv2, numpy as np, os
cv2.setNumThreads(1)
ROOT=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
skip={'basketball2.png','aero3.jpg','right07.jpg','001.jpg','002.jpg','image.0001.pgm','home.png','aero_thresh_det.jpg','image_0000.pgm','AprilTag.pgm','chaxis.jpg','diamondsaxis.jpg','gbaxis.jpg'}
paths=[]
for f in [os.path.join(ROOT,'tests/data/content_labels.csv'),os.path.join(ROOT,'tests/data/content_holdout.csv')]:
    for row in open(f):
        if row.startswith('#') or ',' not in row: continue
        p,l=row.strip().split(',')[:2]
        if l=='photo' and os.path.basename(p) not in skip and p not in paths: paths.append(p)
srcs=[(p,cv2.imread(p)) for p in paths]; srcs=[(p,i) for p,i in srcs if i is not None and min(i.shape[:2])>=100]
print(len(srcs),'distinct photos')
def tf(im,kind):
    h,w=im.shape[:2]
    if kind=='resize': return cv2.resize(im,(w//2,h//2),interpolation=cv2.INTER_AREA)
    if kind=='jpeg30': return cv2.imdecode(cv2.imencode('.jpg',im,[cv2.IMWRITE_JPEG_QUALITY,30])[1],1)
    if kind=='crop10': dx,dy=w//20,h//20; return im[dy:h-dy,dx:w-dx]
    if kind=='rotate3': M=cv2.getRotationMatrix2D((w/2,h/2),3,1.0); return cv2.warpAffine(im,M,(w,h),borderMode=cv2.BORDER_REFLECT)
    if kind=='bright': return cv2.convertScaleAbs(im,alpha=1.0,beta=30)
kinds=['resize','jpeg30','crop10','rotate3','bright']
net=cv2.dnn.readNetFromONNX(os.path.join(os.environ.get('FRAMEMILL_MODELS', os.path.join(ROOT, '.cache/models')), 'nsfw/model.onnx'))
ph=cv2.img_hash.PHash_create()
def sig(im):
    blob=cv2.dnn.blobFromImage(cv2.resize(im.astype(np.float32),(224,224),interpolation=cv2.INTER_LINEAR),1/255.0,(224,224),swapRB=True)
    net.setInput(blob); outs=net.forward(net.getUnconnectedOutLayersNames())
    f=[o for o in outs if o.size==1280][0].ravel(); f=f/np.linalg.norm(f)
    return f,int.from_bytes(bytes(ph.compute(im).ravel()),'little')
items=[]
for gi,(p,im) in enumerate(srcs):
    f,h=sig(im); items.append((gi,'orig',f,h))
    for k in kinds:
        f,h=sig(tf(im,k)); items.append((gi,k,f,h))
F=np.stack([x[2] for x in items]); H=[x[3] for x in items]; G=np.array([x[0] for x in items]); K=[x[1] for x in items]
S=F@F.T; n=len(items)
ham=np.array([[bin(H[i]^H[j]).count('1') for j in range(n)] for i in range(n)])
same=G[:,None]==G[None,:]; iu=np.triu_indices(n,1); sm=same[iu]; ss=S[iu]; hh=ham[iu]
ds=np.sort(ss[~sm]); print('distinct emb top5', ds[-5:]); print('distinct phash min5', np.sort(hh[~sm])[:5])
i,j=iu[0][~sm][np.argmax(ss[~sm])], iu[1][~sm][np.argmax(ss[~sm])]; print('closest distinct', srcs[G[i]][0], K[i], srcs[G[j]][0], K[j])
for k in kinds:
    o=[i for i,x in enumerate(items) if x[1]=='orig']; t=[i for i,x in enumerate(items) if x[1]==k]
    sims=np.array([S[a,b] for a,b in zip(o,t)]); hs=np.array([ham[a,b] for a,b in zip(o,t)])
    print('%-8s emb min %.3f p05 %.3f | phash max %d p95 %.0f' % (k, sims.min(), np.percentile(sims,5), hs.max(), np.percentile(hs,95)))
for t in [0.80,0.85,0.88,0.90,0.92]:
    for hthr in [6,8,10]:
        link=(ss>=t)|(hh<=hthr)
        # transitive groups via union-find
        par=list(range(n))
        def fnd(x):
            while par[x]!=x: par[x]=par[par[x]]; x=par[x]
            return x
        for a,b in zip(iu[0][link],iu[1][link]): par[fnd(a)]=fnd(b)
        roots=[fnd(x) for x in range(n)]
        grouped=np.mean([roots[a]==roots[b] for a,b in zip(iu[0][sm],iu[1][sm])])
        bad=len({r for r in set(roots) if len({G[x] for x in range(n) if roots[x]==r})>1})
        print('emb>=%.2f or phash<=%2d: copy pairs grouped %.3f, groups joining distinct photos %d'%(t,hthr,grouped,bad))
