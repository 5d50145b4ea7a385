"""bench.narrow_whatif writes its what-if tree from the engine's own SQL, and refuses SQL it does not know."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root holds the bench package

from bench import drain_callgrind, narrow_whatif  # noqa: E402

SRC = Path(__file__).resolve().parents[2] / "src"


def _block(path: Path, name: str) -> str:
    sql = path.read_text()
    start, end = narrow_whatif._block(sql, name)
    return sql[start:end]


def test_what_if_tree_moves_provenance_out_of_the_bulk_enqueues_and_the_claim(tmp_path: Path) -> None:
    out = tmp_path / "src"
    narrow_whatif.build(SRC, out)
    sql = out / "oncebeat" / "store" / "sql"
    engine = SRC / "oncebeat" / "store" / "sql" / "postgres" / "migrations"
    numbers = sorted(int(p.name[:4]) for p in engine.glob("*.sql"))
    name = f"{numbers[-1] + 1:04d}_whatif_job_sources.sql"  # after the engine's own, never beside one
    migration = (sql / "postgres" / "migrations" / name).read_text()
    assert "CREATE TABLE job_sources" in migration and "DROP COLUMN source_kind" in migration
    assert (sql / "sqlite" / "migrations" / name).exists()
    queue = sql / "postgres" / "queue.sql"
    for name in ("insert_jobs_bulk", "insert_jobs_bulk_unkeyed"):
        block = _block(queue, name)
        assert "source_kind" not in block.split("INSERT INTO jobs", 1)[1], name
        assert "source_id, created_at)" in block and "(SELECT id FROM sid)" in block, name
    claim = _block(queue, "claim_jobs")
    assert "WITH c AS (\nUPDATE jobs" in claim and "FROM c JOIN job_sources s ON s.id = c.source_id" in claim
    assert "s.version AS source_version" in claim
    # the engine's own tree is untouched
    assert "JOIN job_sources" not in _block(SRC / "oncebeat" / "store" / "sql" / "postgres" / "queue.sql", "claim_jobs")


def test_what_if_refuses_a_claim_it_does_not_know(tmp_path: Path) -> None:
    src = tmp_path / "engine"
    shutil.copytree(SRC, src)
    queue = src / "oncebeat" / "store" / "sql" / "postgres" / "queue.sql"
    queue.write_text(queue.read_text().replace("source_kind, source_host, source_pid, source_name, source_version;",
                                               "source_kind;"))
    with pytest.raises(SystemExit, match="claim_jobs"):
        narrow_whatif.build(src, tmp_path / "out")


def test_callgrind_total_is_read_from_the_backends_own_file(tmp_path: Path) -> None:
    (tmp_path / "cg.4242").write_text("# callgrind format\nevents: Ir\nsummary: 99\n\ntotals: 123456\n")
    assert drain_callgrind._total(4242, str(tmp_path)) == 123456
