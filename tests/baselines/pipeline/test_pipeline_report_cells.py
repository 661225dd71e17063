"""``pipeline_report`` escapes method names as it does graph names: a method named ``dp|split`` with a line
break split its header and rows into extra columns and a stray line."""

from gplace.bench.pipeline import PipelineRecord, pipeline_report


def _columns(line: str) -> int:
    return line.count("|") - line.count("\\|")


def test_every_table_line_keeps_its_columns_whatever_the_method_names():
    records = [PipelineRecord("g|raph", "c", "1f1b", 4, m, t, 0.001, 0.5, False, num_ops=10)
               for m, t in [("single_gpu", 0.004), ("dp|split\nv2", 0.002)]]
    ooms = [PipelineRecord("h", "c", "1f1b", 4, "single_gpu", float("inf"), 0.001, 0.5, False, num_ops=10),
            PipelineRecord("h", "c", "1f1b", 4, "dp|split\nv2", 0.002, 0.001, 0.5, False, num_ops=10)]
    tables = pipeline_report(records + ooms).split("\n\n")
    for table in tables:
        lines = [line for line in table.splitlines() if line.startswith("|")]
        assert all(_columns(line) == _columns(lines[0]) for line in lines), table
    assert not any(line.startswith("v2") for line in "\n".join(tables).splitlines())
