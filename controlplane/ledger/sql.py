"""The ledger's plain SQL on the decision path (once per allowed request and per outcome): the ORM's query
building costs more than these indexed statements themselves (docs/operations.md, "Benchmarks"). Every
statement reserve and settle run at that speed lives here, behind a named function; table names come
from the models."""

from __future__ import annotations

from collections.abc import Sequence

from controlplane.core.db import current_connection
from controlplane.core.held_rows import HeldTable
from controlplane.fleet.models import Worker
from controlplane.ledger.models import Cap, ModelCallReservation, ModelPrice, SpendLine

_q = current_connection().ops.quote_name
_CAPS_SQL = (f"SELECT id, worker_id, unit, {_q('window')}, {_q('limit')} FROM {Cap._meta.db_table} "
             "WHERE worker_id IS NULL OR worker_id = %s ORDER BY id")
_HAS_LINES_SQL = f"SELECT 1 FROM {SpendLine._meta.db_table} WHERE decision_id = %s LIMIT 1"
_LINES_OF_DECISION_SQL = (f"SELECT s.kind, s.worker_id, s.run_id, s.grant_slug, w.name, s.unit "
                          f"FROM {SpendLine._meta.db_table} s JOIN {Worker._meta.db_table} w "
                          "ON w.id = s.worker_id WHERE s.decision_id = %s ORDER BY s.id")
_INSERT_LINES_SQL = (f"INSERT INTO {SpendLine._meta.db_table} (worker_id, run_id, grant_slug, decision_id, "
                     "kind, unit, amount, created_at) VALUES ")
_LINE_VALUES = "(%s, %s, %s, %s, %s, %s, %s, %s)"
# One statement for the few lines of one reserve or settle (ids in list order, as executemany's would be).
_INSERT_SQL_FOR: dict[int, str] = {}
# A group's lines, held for one INSERT at its end (controlplane.core.held_rows): the ledger's totals and
# lookups still see them, the held lines being written before any statement that reads the table.
_HELD = HeldTable(SpendLine._meta.db_table, _INSERT_LINES_SQL, _LINE_VALUES)
PRICE_COLUMNS = ("id", "pattern", "input_micro_per_million", "cached_input_micro_per_million",
                 "output_micro_per_million", "cache_write_micro_per_million",
                 "cache_write_1h_micro_per_million", "max_output_tokens")
_PRICES_SQL = f"SELECT {', '.join(map(_q, PRICE_COLUMNS))} FROM {ModelPrice._meta.db_table} ORDER BY id"
RESERVATION_COLUMNS = ("decision_id", "model", "price_pattern", "input_micro_per_million",
                       "cached_input_micro_per_million", "output_micro_per_million",
                       "cache_write_micro_per_million", "cache_write_1h_micro_per_million", "input_estimate",
                       "max_output", "tokens", "micro", "created_at")
_RESERVATION_TABLE = ModelCallReservation._meta.db_table
_INSERT_RESERVATION_SQL = (f"INSERT INTO {_RESERVATION_TABLE} ({', '.join(map(_q, RESERVATION_COLUMNS))}) "
                           f"VALUES ({', '.join(['%s'] * len(RESERVATION_COLUMNS))})")
_RESERVATION_SQL = (f"SELECT {', '.join(map(_q, RESERVATION_COLUMNS))} FROM {_RESERVATION_TABLE} "
                    "WHERE decision_id = %s")


def cap_rows(worker_id: int) -> list[tuple]:
    """(id, worker_id, unit, window, limit) of the worker's caps and the org's, in id order."""
    with current_connection().cursor() as cur:
        cur.execute(_CAPS_SQL, [worker_id])
        return cur.fetchall()


def spent_totals(terms: Sequence[tuple[str, int | None, object | None]], since=None) -> list[int]:
    """For each (unit, worker_id or None for the org, window start or None for all time), the amount its
    spend lines add up to, in one statement; `since`: a start no line before which is wanted (when every
    term has one). Starts are adapted for the database (adapted_time)."""
    sums, params = [], []
    for unit, worker_id, start in terms:
        condition = ["unit = %s"]
        params.append(unit)
        if worker_id is not None:
            condition.append("worker_id = %s")
            params.append(worker_id)
        if start is not None:
            condition.append("created_at >= %s")
            params.append(start)
        sums.append(f"COALESCE(SUM(CASE WHEN {' AND '.join(condition)} THEN amount ELSE 0 END), 0)")
    units = sorted({unit for unit, _, _ in terms})
    where = f"unit IN ({', '.join(['%s'] * len(units))})"
    params += units
    if since is not None:
        where += " AND created_at >= %s"
        params.append(since)
    with current_connection().cursor() as cur:
        cur.execute(f"SELECT {', '.join(sums)} FROM {SpendLine._meta.db_table} WHERE {where}", params)
        return [int(value) for value in cur.fetchone()]


def price_rows() -> list[tuple]:
    """Every model price as a tuple of PRICE_COLUMNS, in id order."""
    with current_connection().cursor() as cur:
        cur.execute(_PRICES_SQL)
        return cur.fetchall()


def reservation_insert(values: Sequence) -> None:
    """One model call's reservation: values in RESERVATION_COLUMNS' order, created_at adapted."""
    with current_connection().cursor() as cur:
        cur.execute(_INSERT_RESERVATION_SQL, list(values))


def reservation_row(decision_id: str) -> tuple | None:
    """The decision's model call reservation as a tuple of RESERVATION_COLUMNS, or None."""
    with current_connection().cursor() as cur:
        cur.execute(_RESERVATION_SQL, [decision_id])
        return cur.fetchone()


def decision_has_lines(decision_id: str) -> bool:
    with current_connection().cursor() as cur:
        cur.execute(_HAS_LINES_SQL, [decision_id])
        return cur.fetchone() is not None


def lines_of_decision(decision_id: str) -> list[tuple]:
    """(kind, worker_id, run_id, grant_slug, worker name, unit) of the decision's lines, in order."""
    with current_connection().cursor() as cur:
        cur.execute(_LINES_OF_DECISION_SQL, [decision_id])
        return cur.fetchall()


def lines_insert(lines: Sequence[Sequence]) -> None:
    """Append spend lines, each [worker_id, run_id, grant_slug, decision_id, kind, unit, amount, created_at]
    with created_at already adapted for the database (adapted_time)."""
    count = len(lines)
    if not count:
        return
    conn = current_connection()
    if _HELD.hold(conn, *lines):
        return
    statement = _INSERT_SQL_FOR.get(count)
    if statement is None:
        statement = _INSERT_SQL_FOR.setdefault(count, _INSERT_LINES_SQL + ", ".join([_LINE_VALUES] * count))
    with conn.cursor() as cur:
        cur.execute(statement, [value for line in lines for value in line])


def adapted_time(moment):
    """A datetime as the spend lines' created_at takes it in lines_insert."""
    return current_connection().ops.adapt_datetimefield_value(moment)
