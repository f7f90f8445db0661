"""Inner suite: real SGLang launched by the plugin on a Ray node (run by tests/real/test_real_ray.py)."""

from pytest_sglang.server.ray import RayProcess


def test_the_server_runs_on_a_ray_node_and_generates(sglang_server):
    process = sglang_server.process
    assert isinstance(process, RayProcess), process
    print("NODE", process.seat.node)
    with sglang_server.client() as client:
        answer = client.post("/generate", json={"text": "1+1=", "sampling_params": {"max_new_tokens": 4}})
    assert answer.status_code == 200, answer.text
    assert answer.json()["meta_info"]["completion_tokens"] >= 1
