import sqlite3

db = sqlite3.connect(":memory:")
db.executescript(open("shop.sql").read())
rows = db.execute("""
    SELECT sku FROM products
    WHERE id NOT IN (
        SELECT oi.product_id FROM order_items oi JOIN orders o ON o.id = oi.order_id
        WHERE o.status != 'cancelled'
    )
    ORDER BY sku
""").fetchall()
print(", ".join(sku for (sku,) in rows))
