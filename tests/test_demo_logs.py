"""The demo tells the seed article's story: the seed setup shows its causes, the fixed run shows them gone."""

from __future__ import annotations

from tb_llmdiag import api
from tb_llmdiag.ingest.discover import discover
from tracepaths import REPO


def reports() -> dict[str, dict]:
    """One report per demo run (a multi-rank run: its rank 0)."""
    index = discover(str(REPO / "demo_logs"))
    return {tf.run: api.analyze(tf).report for tf in index.files if tf.rank in (0, None)}


def test_the_demo_holds_the_seed_pair_the_jax_run_and_a_two_rank_job() -> None:
    index = discover(str(REPO / "demo_logs"))
    assert sorted((tf.run, tf.rank) for tf in index.files) == [
        ("ddp_straggler_2gpu", 0), ("ddp_straggler_2gpu", 1), ("fixed_lora_qwen1.5b", 0),
        ("jax_gpu_xplane", None), ("seed_lora_qwen1.5b", 0)]


def test_seed_shows_the_seed_causes_and_the_fixed_run_does_not() -> None:
    runs = reports()
    assert set(runs) == {"seed_lora_qwen1.5b", "fixed_lora_qwen1.5b", "jax_gpu_xplane", "ddp_straggler_2gpu"}
    assert all(r["status"] == "ok" for r in runs.values())
    seed, fixed = runs["seed_lora_qwen1.5b"], runs["fixed_lora_qwen1.5b"]
    seed_ids = [f["id"] for f in seed["findings"]]
    fixed_ids = [f["id"] for f in fixed["findings"]]
    # low busy share / host-bound, step time following the padded length, pageable copies, warm-up
    assert seed_ids[0] == "host_bound"
    assert {"variable_shapes", "pageable_memcpy", "warmup_in_window"} <= set(seed_ids)
    # fixed: packing, pinned memory and a steady-state window remove those; host-bound is reduced
    assert not {"variable_shapes", "pageable_memcpy", "warmup_in_window"} & set(fixed_ids)
    share = {r: next(f["saving"]["share"] for f in runs[r]["findings"] if f["id"] == "host_bound")
             for r in ("seed_lora_qwen1.5b", "fixed_lora_qwen1.5b")}
    assert share["fixed_lora_qwen1.5b"] < share["seed_lora_qwen1.5b"]
    assert fixed["headline"]["gpu_busy_share"] > 4 * seed["headline"]["gpu_busy_share"]
    assert fixed["headline"]["tokens_per_s"] > 4 * seed["headline"]["tokens_per_s"]


def test_xplane_demo_finds_the_planted_recompile() -> None:
    jax = reports()["jax_gpu_xplane"]
    assert jax["findings"][0]["id"] == "recompilation"
    assert jax["findings"][0]["evidence"]["steps"] == [3]
    assert "host_transfer" in [f["id"] for f in jax["findings"]]
