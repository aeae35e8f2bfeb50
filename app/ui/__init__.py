"""The admin dashboard's static files (static/): plain ES modules, CSS and one HTML page.

No build step: what is here is what the browser gets, and it talks only to the public API.
"""
