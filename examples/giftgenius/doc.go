// Package giftgenius is the GiftGenius example: an agent collects a recipient's profile, picks gifts
// from a small catalogue, filters them by budget, delivery and region, and records the choice — with
// ids in session state, profiles in long-term memory and checkpoints that let a user return weeks later.
package giftgenius
