#!/bin/bash
psql -U postgres app -c "create table users(id serial primary key, name text); insert into users(name) values ('ada');"
