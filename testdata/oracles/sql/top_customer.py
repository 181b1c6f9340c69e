import sqlite3

db = sqlite3.connect(":memory:")
db.executescript(open("shop.sql").read())
name, revenue = db.execute("""
    SELECT c.name, SUM(oi.quantity * oi.unit_price) AS revenue
    FROM customers c
    JOIN orders o ON o.customer_id = c.id
    JOIN order_items oi ON oi.order_id = o.id
    WHERE o.status IN ('delivered', 'shipped')
    GROUP BY c.id
    ORDER BY revenue DESC
    LIMIT 1
""").fetchone()
print(name)
