import re
import sqlite3

n, year = map(int, re.search(r"at least (\d+) orders in (\d{4})", INSTRUCTION).groups())
db = sqlite3.connect(":memory:")
db.executescript(open("shop.sql").read())
rows = db.execute("""
    SELECT c.email FROM customers c JOIN orders o ON o.customer_id = c.id
    WHERE substr(o.ordered_at, 1, 4) = ? AND o.status != 'cancelled'
    GROUP BY c.id HAVING COUNT(*) >= ?
""", (str(year), n)).fetchall()
print(", ".join(email for (email,) in rows))
