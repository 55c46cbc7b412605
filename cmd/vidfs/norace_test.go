//go:build !race

package main

const raceOverhead = 0

const raceTierOverhead = 0
