"""Operations that exist only on a fleet behind SGLang's gateway: health, failover, PD, registration.

May import every other gates subpackage; none of them imports this one.
"""
