"""Inner test: the fleet the outer test attached to or launched has the shape it expects.

The outer test sets FLEET_EXPECT_WORKERS, and FLEET_EXPECT_REACHABLE: 1 (default) or 0 for every
worker, or one 1/0 per worker in the fleet's order (by URL).
"""

import os

import httpx


def test_fleet_shape(sglang_fleet, sglang_server):
    workers = int(os.environ["FLEET_EXPECT_WORKERS"])
    flags = os.environ.get("FLEET_EXPECT_REACHABLE", "1").split(",")
    reachable = [flag == "1" for flag in (flags * workers if len(flags) == 1 else flags)]
    assert sglang_server is sglang_fleet
    assert len(sglang_fleet.workers) == workers
    assert [w.reachable for w in sglang_fleet.workers] == reachable
    assert len({w.url for w in sglang_fleet.workers}) == workers
    assert all(w.info()["max_total_num_tokens"] > 0 for w in sglang_fleet.workers if w.reachable)
    key = os.environ.get("SGLANG_API_KEY")
    answer = httpx.post(f"{sglang_server.url}/generate", timeout=60, trust_env=False,
                        headers={"Authorization": f"Bearer {key}"} if key else {},
                        json={"text": "The capital of France is", "sampling_params": {"max_new_tokens": 4}})
    assert answer.status_code == 200, answer.text
    print(f"FLEET {sglang_fleet.summary()} mode={sglang_fleet.mode} launched={sglang_fleet.launched} "
          f"unreachable={[w.unreachable for w in sglang_fleet.workers]}")
