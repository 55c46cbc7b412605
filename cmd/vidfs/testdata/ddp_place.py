"""PlanSampler(placement=...) under a real torch.distributed (gloo, CPU): WORLD=4 ranks as two
nodes of two (torchrun's environment), each rank a process. Every rank must come out of each
case the same way, none left waiting in a collective:
- placement="node": the ranks agree, and place alike;
- placement="host" with nodes given: the same;
- placement="host" gathering host names: all four ranks run on this one host, so two nodes
  would share it: every rank raises;
- rank 3 with another seed: every rank raises, naming rank 3.
usage: PYTHONPATH=python/ ddp_place.py MNT PORT; prints "ok" or what differed."""
import json
import os
import subprocess
import sys

WORLD, LOCAL = 4, 2


def rank_main(mnt, port, rank):
    import torch.distributed as dist
    from vidfs import Mount, PlanSampler
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % port, rank=rank, world_size=WORLD)
    m = Mount(mnt)
    out = {}
    cases = {"node": {"placement": "node"}, "host_given": {"placement": "host", "nodes": ["hB", "hA"]},
             "host_gathered": {"placement": "host"}, "seed_differs": {"placement": "node", "seed": 9 if rank == 3 else 1}}
    for name, kw in cases.items():
        kw = dict({"seed": 1}, **kw)
        try:
            s = PlanSampler(m, rank=rank, world_size=WORLD, clips="random", name="p%d" % rank, **kw)
            out[name] = {"node": s.node, "where": s._video_node.tolist(), "len": len(s)}
        except ValueError as e:
            out[name] = {"error": str(e)}
    dist.destroy_process_group()
    print(json.dumps(out))


def main(mnt, port):
    env = dict(os.environ, LOCAL_WORLD_SIZE=str(LOCAL), WORLD_SIZE=str(WORLD))
    procs = [subprocess.Popen([sys.executable, __file__, "--rank", mnt, port, str(r)], stdout=subprocess.PIPE,
                              env=dict(env, RANK=str(r), GROUP_RANK=str(r // LOCAL), LOCAL_RANK=str(r % LOCAL)))
             for r in range(WORLD)]
    outs = []
    for p in procs:
        so, _ = p.communicate(timeout=120)  # a rank left waiting in a collective fails here
        assert p.returncode == 0, "a rank exited %d" % p.returncode
        outs.append(json.loads(so.decode().strip().splitlines()[-1]))
    for name in ("node", "host_given"):
        assert all("error" not in o[name] for o in outs), [o[name] for o in outs]
        assert len({json.dumps(o[name]["where"]) for o in outs}) == 1, name + ": ranks place otherwise"
        assert [o[name]["node"] for o in outs] == [0, 0, 1, 1], name
        assert len({o[name]["len"] for o in outs}) == 1, name + ": ranks read different numbers"
    assert outs[0]["node"]["where"] != outs[0]["host_given"]["where"], "host names place as numbers"
    for name, words in (("host_gathered", "two nodes on one host"), ("seed_differs", "ranks [3]")):
        for r, o in enumerate(outs):
            assert "error" in o[name] and words in o[name]["error"], "%s, rank %d: %s" % (name, r, o[name])
    print("ok")


if __name__ == "__main__":
    if sys.argv[1] == "--rank":
        rank_main(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main(sys.argv[1], sys.argv[2])
