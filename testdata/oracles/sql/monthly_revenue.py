import re
import sqlite3

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
month_name, year = re.search(r"revenue of (\w+) (\d{4})", INSTRUCTION).groups()
prefix = f"{year}-{MONTHS.index(month_name) + 1:02d}"
db = sqlite3.connect(":memory:")
db.executescript(open("shop.sql").read())
(total,) = db.execute("""
    SELECT COALESCE(SUM(oi.quantity * oi.unit_price), 0)
    FROM orders o JOIN order_items oi ON oi.order_id = o.id
    WHERE substr(o.ordered_at, 1, 7) = ? AND o.status IN ('delivered', 'shipped')
""", (prefix,)).fetchone()
print(f"{total:.2f}")
