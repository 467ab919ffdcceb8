def slugify(text):
    """Turn a title into a URL slug: lower case, words joined by dashes."""
    return "-".join(text.split())
