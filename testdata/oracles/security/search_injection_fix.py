import sqlite3


def search_products(dump, term):
    """Return the sorted SKUs of the products whose name contains term, ignoring case."""
    conn = sqlite3.connect(":memory:")
    conn.executescript(dump)
    rows = conn.execute(
        "SELECT sku FROM products WHERE instr(lower(name), lower(?)) > 0 ORDER BY sku", (term,)
    ).fetchall()
    return [sku for (sku,) in rows]
