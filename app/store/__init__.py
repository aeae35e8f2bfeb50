"""The database room. Other rooms name what they need of SQLAlchemy through it, so that the
database stack stays the store's (and the live models') business: the connection a read or
write function is handed, and the errors a caller may tell apart."""

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError  # a row breaks a constraint
from sqlalchemy.exc import SQLAlchemyError as StoreError  # any error of the database or driver

__all__ = ["Connection", "IntegrityError", "StoreError"]
