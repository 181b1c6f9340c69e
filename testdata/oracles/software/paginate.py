def paginate(items, page, per_page):
    """Return the items on page (1-based) when each page holds per_page items."""
    start = (page - 1) * per_page
    return items[start : start + per_page]
