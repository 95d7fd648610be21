"""jacobian."""
