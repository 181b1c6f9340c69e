import sqlite3


def customer_totals(dump):
    """Return [[name, total_cents], ...] for every customer in the SQLite dump.

    total_cents is the sum of quantity * unit_price_cents over the items of the
    customer's orders whose status is not 'cancelled' (0 when there are none).
    Sorted by total_cents, largest first, then by name.
    """
    conn = sqlite3.connect(":memory:")
    conn.executescript(dump)
    rows = conn.execute(
        """
        SELECT c.name, COALESCE(SUM(oi.quantity * oi.unit_price_cents), 0) AS total
        FROM customers c
        LEFT JOIN orders o ON o.customer_id = c.id AND o.status != 'cancelled'
        LEFT JOIN order_items oi ON oi.order_id = o.id
        GROUP BY c.id
        ORDER BY total DESC, c.name
        """
    ).fetchall()
    return [[name, total] for name, total in rows]
