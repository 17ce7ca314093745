# A PyTorch twin of configs/demo.json's network (MobileNetV1Enhance 0.25, then the SVTR neck or
# Im2Seq, CTC head), for checking that ocrtrain's training dynamics are the architecture's and
# not a bug: it starts from ocrtrain's own initial weights, reads the same receipt fields with
# PaddleOCR's RecResizeImg at 32x160, and trains with Adam, linear warm-up (0.3 epoch) and
# cosine decay, CTC mean over the batch, dropout 0.1 in the neck as configured. Developer tool:
# nothing in the build or the tests needs Python. docs/MODELS.md has the comparison.
#
#   ocrtrain train -c configs/demo.json --max-steps 1 -o 'Optimizer.lr={"name":"Const","learning_rate":0}' \
#       Global.save_model_dir=/tmp/init [Architecture.Neck=...] ...     # the initial weights
#   python tools/torch_twin.py /tmp/init/latest/model.safetensors 0.02 248 svtr|reshape [DATA_DIR]
#
# (PIL, numpy and torch needed.)
import json, struct, math, sys, random, numpy as np, torch, torch.nn as nn, torch.nn.functional as F
from PIL import Image
torch.set_num_threads(1)
def load(p):
    b=open(p,'rb').read(); n=struct.unpack('<Q',b[:8])[0]; h=json.loads(b[8:8+n]); d={}
    for k,v in h.items():
        if k=='__metadata__': continue
        s,e=v['data_offsets']; d[k]=torch.from_numpy(np.frombuffer(b[8+n+s:8+n+e],dtype=np.float32).reshape(v['shape']).copy())
    return d
W=load(sys.argv[1]); lr0=float(sys.argv[2]); steps=int(sys.argv[3]); neck=sys.argv[4]; drop=0.1
def conv_w(k): w=W[k]; return w.permute(0,3,1,2).contiguous()
class CBN(nn.Module):
    def __init__(s, pfx, conv, bn, stride, groups, act, pad):
        super().__init__(); w=conv_w(pfx+'.'+conv+'.weight'); s.w=nn.Parameter(w); s.stride=stride; s.groups=groups; s.pad=pad
        C=w.shape[0]; s.bn=nn.BatchNorm2d(C, momentum=0.1, eps=1e-5)
        s.bn.weight.data=W[pfx+'.'+bn+'.weight'].clone(); s.bn.bias.data=W[pfx+'.'+bn+'.bias'].clone(); s.act=act
    def forward(s,x): return s.act(s.bn(F.conv2d(x,s.w,None,s.stride,s.pad,1,s.groups)))
hsw=F.hardswish; swish=lambda x: x*torch.sigmoid(x)
class SE(nn.Module):
    def __init__(s,pfx):
        super().__init__(); s.w1=nn.Parameter(conv_w(pfx+'.conv1.weight')); s.b1=nn.Parameter(W[pfx+'.conv1.bias'].clone())
        s.w2=nn.Parameter(conv_w(pfx+'.conv2.weight')); s.b2=nn.Parameter(W[pfx+'.conv2.bias'].clone())
    def forward(s,x):
        p=F.adaptive_avg_pool2d(x,1); p=F.relu(F.conv2d(p,s.w1,s.b1)); p=F.hardsigmoid(F.conv2d(p,s.w2,s.b2)); return x*p
class Backbone(nn.Module):
    def __init__(s):
        super().__init__(); s.conv1=CBN('backbone.conv1','_conv','_batch_norm',2,1,hsw,1)
        cfg=[(3,1),(3,1),(3,1),(3,(2,1)),(3,1),(3,(2,1))]+[(5,1)]*5+[(5,(2,1)),(5,(1,2))]
        s.blocks=nn.ModuleList()
        for i,(k,st) in enumerate(cfg):
            p=f'backbone.block_list.{i}'; C=W[p+'._depthwise_conv._conv.weight'].shape[0]
            m=nn.Module(); m.dw=CBN(p+'._depthwise_conv','_conv','_batch_norm',st,C,hsw,k//2)
            m.se=SE(p+'._se') if (p+'._se.conv1.weight') in W else None
            m.pw=CBN(p+'._pointwise_conv','_conv','_batch_norm',1,1,hsw,0); s.blocks.append(m)
    def forward(s,x):
        x=s.conv1(x)
        for m in s.blocks:
            x=m.dw(x)
            if m.se is not None: x=m.se(x)
            x=m.pw(x)
        return F.avg_pool2d(x,2,2)
def lin(k):
    w=W[k+'.weight']; l=nn.Linear(w.shape[0],w.shape[1]); l.weight.data=w.t().contiguous(); l.bias.data=W[k+'.bias'].clone(); return l
def ln(k,eps):
    w=W[k+'.weight']; l=nn.LayerNorm(w.shape[0],eps=eps); l.weight.data=w.clone(); l.bias.data=W[k+'.bias'].clone(); return l
class Block(nn.Module):
    def __init__(s,p,heads=8):
        super().__init__(); s.n1=ln(p+'.norm1',1e-5); s.qkv=lin(p+'.mixer.qkv'); s.proj=lin(p+'.mixer.proj'); s.n2=ln(p+'.norm2',1e-5)
        s.fc1=lin(p+'.mlp.fc1'); s.fc2=lin(p+'.mlp.fc2'); s.h=heads
    def forward(s,x):
        B,N,C=x.shape; hd=C//s.h
        q,k,v=s.qkv(s.n1(x)).reshape(B,N,3,s.h,hd).permute(2,0,3,1,4)
        a=F.dropout(torch.softmax((q*hd**-0.5)@k.transpose(-1,-2),-1),drop,s.training)
        y=(a@v).transpose(1,2).reshape(B,N,C); x=x+F.dropout(s.proj(y),drop,s.training)
        h=F.dropout(swish(s.fc1(s.n2(x))),drop,s.training); return x+F.dropout(s.fc2(h),drop,s.training)
class Neck(nn.Module):
    def __init__(s,p='neck.encoder'):
        super().__init__()
        s.c1=CBN(p+'.conv1','conv','norm',1,1,swish,(1,1)); s.c2=CBN(p+'.conv2','conv','norm',1,1,swish,0)
        s.blocks=nn.ModuleList([Block(f'{p}.svtr_block.{i}') for i in range(2)]); s.norm=ln(p+'.norm',1e-6)
        s.c3=CBN(p+'.conv3','conv','norm',1,1,swish,0); s.c4=CBN(p+'.conv4','conv','norm',1,1,swish,(1,1)); s.c5=CBN(p+'.conv1x1','conv','norm',1,1,swish,0)
    def forward(s,x):
        h=x; z=s.c2(s.c1(x)); B,C,H,Wd=z.shape; z=z.flatten(2).transpose(1,2)
        for b in s.blocks: z=b(z)
        z=s.norm(z).reshape(B,H,Wd,C).permute(0,3,1,2); z=s.c3(z); z=torch.cat([h,z],1); z=s.c5(s.c4(z)); return z
class Net(nn.Module):
    def __init__(s):
        super().__init__(); s.bb=Backbone(); s.neck=Neck() if neck=='svtr' else None; s.fc=lin('head.fc')
    def forward(s,x):
        x=s.bb(x)
        if s.neck is not None: x=s.neck(x)
        return s.fc(x.squeeze(2).transpose(1,2))
D=sys.argv[5] if len(sys.argv)>5 else 'train_data/receipts'
chars=['blank']+[l.rstrip('\n').rstrip('\r') for l in open('configs/dicts/en_dict.txt',encoding='utf-8')]+[' ']
idx={c:i for i,c in enumerate(chars)}
def read(split,lim=None):
    X=[];Y=[]
    for line in open(f'{D}/{split}/fields.txt',encoding='utf-8'):
        p,t=line.rstrip('\n').split('\t',1)
        im=Image.open(f'{D}/{split}/{p}').convert('RGB'); w,h=im.size; rw=min(160,math.ceil(32*w/h))
        a=np.asarray(im.resize((rw,32),Image.BILINEAR),dtype=np.float32)[:,:,::-1]/255.0; a=(a-0.5)/0.5
        x=np.zeros((3,32,160),np.float32); x[:,:,:rw]=a.transpose(2,0,1)
        lab=[idx[c] for c in t if c in idx]
        if lab and len(lab)<=25: X.append(x); Y.append((lab,t))
        if lim and len(X)>=lim: break
    return np.stack(X),Y
Xtr,Ytr=read('train'); Xev,Yev=read('eval')
print('data',len(Xtr),len(Xev),flush=True)
torch.manual_seed(0); random.seed(0)
net=Net(); net.train()
opt=torch.optim.Adam(net.parameters(),lr=lr0,betas=(0.9,0.999),eps=1e-8)
B=32; per_epoch=len(Xtr)//B; warm=int(0.3*per_epoch); total=steps
def lr_at(it):
    if it<warm: return lr0*it/warm
    return 0.5*lr0*(1+math.cos(math.pi*(it-warm)/(total-warm)))
def evaluate():
    net.eval(); ok=0
    with torch.no_grad():
        for i in range(0,len(Xev),128):
            out=net(torch.from_numpy(Xev[i:i+128])).argmax(-1).numpy()
            for r,(lab,t) in zip(out,Yev[i:i+128]):
                s=[];prev=-1
                for c in r:
                    if c!=prev and c!=0: s.append(chars[c])
                    prev=c
                ok+= ''.join(s)==t
    net.train(); return ok/len(Xev)
it=0; losses=[]
while it<steps:
    perm=np.random.permutation(len(Xtr))
    for j in range(per_epoch):
        if it>=steps: break
        ids=perm[j*B:(j+1)*B]; x=torch.from_numpy(Xtr[ids]); labs=[Ytr[i][0] for i in ids]
        for g in opt.param_groups: g['lr']=lr_at(it)
        lp=net(x).log_softmax(-1).transpose(0,1); T=lp.shape[0]
        tgt=torch.tensor(sum(labs,[])); tl=torch.tensor([len(l) for l in labs]); il=torch.full((len(ids),),T)
        loss=F.ctc_loss(lp,tgt,il,tl,blank=0,reduction='none',zero_infinity=False).mean()
        opt.zero_grad(); loss.backward(); opt.step(); losses.append(loss.item()); it+=1
        if it%20==0: print(f'step {it} loss {np.mean(losses[-20:]):.2f}',flush=True)
        if it%124==0: print(f'step {it} eval acc {evaluate():.3f}',flush=True)
