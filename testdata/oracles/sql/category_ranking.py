import sqlite3

db = sqlite3.connect(":memory:")
db.executescript(open("shop.sql").read())
rows = db.execute("""
    SELECT p.category, SUM(oi.quantity) AS units
    FROM order_items oi
    JOIN orders o ON o.id = oi.order_id
    JOIN products p ON p.id = oi.product_id
    WHERE o.status != 'cancelled'
    GROUP BY p.category
    ORDER BY units DESC
""").fetchall()
print(", ".join(cat for cat, _ in rows))
