import re
import sqlite3

country = re.search(r"whose country is '([^']+)'", INSTRUCTION).group(1)
db = sqlite3.connect(":memory:")
db.executescript(open("shop.sql").read())
(avg,) = db.execute("""
    SELECT AVG(value) FROM (
        SELECT SUM(oi.quantity * oi.unit_price) AS value
        FROM orders o
        JOIN customers c ON c.id = o.customer_id
        JOIN order_items oi ON oi.order_id = o.id
        WHERE o.status = 'delivered' AND c.country = ?
        GROUP BY o.id
    )
""", (country,)).fetchone()
print(f"{avg:.2f}")
