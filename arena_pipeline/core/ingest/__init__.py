"""Reading a dump (Hub, local folder, CSV export) and loading it into the warehouse, batch by batch."""
